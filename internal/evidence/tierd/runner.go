package tierd

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// Options turn on the router's evidence pass: on every Interval it writes
// serving records from its journal's last Window into Store and publishes
// each engine endpoint's tier in /narwhal/state.evidence and
// narwhal_endpoint_tier. Store "" disables it.
type Options struct {
	Store    string
	Interval time.Duration // default 1 minute
	Window   time.Duration // default 10 minutes
}

// Host is what a Runner needs from the router: the fleet, its journal's
// path ("" for none), a clock, a log and the tier gauge's setter.
type Host struct {
	Fleet       *fleet.Config
	JournalPath string
	Clock       ports.Clock
	Log         *slog.Logger
	SetTier     func(iid, tier string)
}

// Runner is the router's evidence pass and the last state it published:
// it reads the journal file, never the router, so the router only starts
// it and reads State.
type Runner struct {
	o     Options
	h     Host
	state atomic.Pointer[routerdoc.EvidenceState] // the last pass's, lock-free for /narwhal/state
}

// NewRunner applies o's defaults; a Runner with o.Store "" never runs.
func NewRunner(o Options, h Host) *Runner {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Minute
	}
	return &Runner{o: o, h: h}
}

// Enabled says whether the pass runs (a store is configured).
func (r *Runner) Enabled() bool { return r.o.Store != "" }

// Run passes once now, then every Interval until ctx ends; a disabled
// Runner returns at once.
func (r *Runner) Run(ctx context.Context) {
	if !r.Enabled() {
		return
	}
	loop := &Loop{Store: store.Open(r.o.Store), Fleet: r.h.Fleet, JournalPath: r.h.JournalPath, Interval: r.o.Interval,
		Window: r.o.Window, Clock: r.h.Clock, Log: r.h.Log}
	loop.Publish = func(rep Report, err error) { r.publish(rep, loop.JournalState(), err) } // on loop's goroutine
	loop.Run(ctx)
}

// publish stores a pass's tiers and sets the gauge; a failed pass keeps
// the previous tiers and says why.
func (r *Runner) publish(rep Report, jr JournalRead, err error) {
	st := &routerdoc.EvidenceState{Enabled: true, Endpoints: map[string]routerdoc.EndpointTier{}, UpdatedAt: r.h.Clock.Now().UTC().Format(time.RFC3339)}
	if r.h.JournalPath != "" {
		st.Journal = &routerdoc.EvidenceJournal{TornRows: jr.Torn.Rows, FirstTorn: jr.Torn.First, PassBytes: jr.Pass.Bytes,
			PassRows: jr.Pass.Rows, WindowRows: jr.WindowRows, ServingError: jr.Error}
	}
	if err != nil {
		st.Error = err.Error()
		r.h.Log.Warn("evidence pass failed; tiers unchanged", "err", err)
		if prev := r.state.Load(); prev != nil {
			st.Endpoints, st.Request = prev.Endpoints, prev.Request
		}
		r.state.Store(st)
		return
	}
	st.Request = rep.Request
	for _, e := range rep.Endpoints {
		missing := make([]string, 0, len(e.Missing))
		for _, m := range e.Missing {
			missing = append(missing, string(m))
		}
		st.Endpoints[e.Engine] = routerdoc.EndpointTier{Endpoint: e.Endpoint, Tier: string(e.Tier), Missing: missing}
		r.h.SetTier(e.Engine, string(e.Tier))
	}
	r.state.Store(st)
}

// State is /narwhal/state.evidence: the last pass's, or an empty one.
func (r *Runner) State() routerdoc.EvidenceState {
	if st := r.state.Load(); st != nil {
		return *st
	}
	return routerdoc.EvidenceState{Enabled: r.Enabled(), Endpoints: map[string]routerdoc.EndpointTier{}}
}
