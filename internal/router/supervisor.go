package router

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// The router's side of the availability supervisor (internal/avail): the
// core as the supervisor may touch it, what a failed leg reports, and the
// admin guard in front of the lifecycle routes.

// coreSide is avail.Core over the router's scheduling core: every call
// takes r.mu (locked). The supervisor is the only caller of SetLive, and it
// publishes holding its one mutex, so that lock comes before r.mu: nothing
// holding r.mu may call into the supervisor (Usable and LiveCount take no
// lock, but anything that publishes or reads the lifecycle does).
type coreSide struct{ r *Router }

func (c coreSide) SetLive(live map[string]bool) {
	c.r.locked(func() {
		for _, iid := range slices.Sorted(maps.Keys(live)) { // iid order: a replayable log
			c.r.core.SetLive(iid, live[iid])
		}
		c.r.serveQueueLocked() // a readmitted engine is room
	})
}

func (c coreSide) SetProbation(iid string, on bool) {
	c.r.locked(func() { c.r.core.SetProbation(iid, on) })
}

func (c coreSide) Snapshot() (s *sched.Snapshot) {
	c.r.locked(func() { s = c.r.core.Snapshot(c.r.now()) })
	return s
}

func (c coreSide) DecodePace(now float64) (p []sched.Pace) {
	c.r.locked(func() { p = c.r.core.DecodePace(now) })
	return p
}

// status is avail.Status: what the lifecycle document says of the router.
type status struct{ r *Router }

func (s status) ControlsFleet() bool { return s.r.ha.Controls() }
func (s status) Ready() bool         { return s.r.ready() }

// reportLeg reports a failed leg to the supervisor, in one call (a
// decode leg names its producer and the tokens that streamed: the
// supervisor tells a cut from a fault). A client that went away is not
// the engine's fault.
func (r *Router) reportLeg(f avail.Failure) {
	if f.Err != errClientGone {
		r.av.LegFailed(f)
	}
}

// coverageLocked is "" when live engines can take both legs, else what is
// missing: a role needs a live engine of that role, or a live unpinned one
// to fall back on. Called with r.mu held.
func (r *Router) coverageLocked() string {
	var missing []string
	for _, role := range []fleet.Role{fleet.Prefill, fleet.Decode} {
		covered := false
		for _, iid := range r.order {
			i := r.core.Instance(iid)
			covered = covered || (i != nil && i.Live && (i.Role == role || !i.Pin))
		}
		if !covered {
			missing = append(missing, string(role))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "no live engine can take the " + strings.Join(missing, " or ") + " leg"
}

// backAfter is the Retry-After of a fleet with no engine to place on:
// the soonest an engine held out may be back (lifecycle.NextRelease: a
// timed hold's end, the monitor pass that lifts it; an ejected engine's
// next readmission probe), else the next monitor pass.
func (r *Router) backAfter() int {
	pass := r.cfg.Controller.MonitorIntervalS
	wait := pass
	if s, ok := r.life.NextRelease(r.now(), pass); ok {
		wait = s + pass
	}
	return max(1, int(math.Ceil(wait)))
}

// unready is the readiness reason when no engine, or no engine for a
// role, can take work: it starts with reasonNoEngines and names the holds
// behind it.
func (r *Router) unready(missing string) string {
	reason := reasonNoEngines
	if missing != "" {
		reason += ": " + missing
	}
	if held := r.av.HoldsReason(); held != "" {
		reason += "; " + held
	}
	return reason
}
