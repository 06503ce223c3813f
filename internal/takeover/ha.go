package takeover

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Config is what the router's HA side is built from.
// Options are the router's durable-state and lease settings (the router
// takes them as its HA options).
type Options struct {
	// StatePath is where the handoff document is written; "" disables it.
	StatePath string
	// Resume applies the document at StatePath at start.
	Resume bool
	// Lease, when set, fences the router: it places work only while it
	// holds the lease.
	Lease *state.Lease
	// StandbyOf is the primary's base URL: start as a warm standby that
	// follows it and takes over when its lease expires. Needs Lease.
	StandbyOf string
}

// Config is what New needs: the router's Options and its parts.
type Config struct {
	// StatePath is where the handoff document is written; "" disables it.
	StatePath string
	// Lease, when set, fences the router: it places work only while it
	// holds the lease.
	Lease *state.Lease
	// StandbyOf is the primary's base URL: start as a warm standby that
	// follows it and takes over when its lease expires. Needs Lease.
	StandbyOf string

	Fleet   *fleet.Config   // model, pins, recovery policy, request timeout, engine contract
	Engines []string        // the configured iids, sorted
	Clock   ports.Clock     // reclaim pacing, takeover timing, the document's wall time
	Log     *slog.Logger    // nil: no logs
	Journal *journal.Writer // nil: no journal, no crash accounting rows
	Metrics *metrics.Metrics
	Life    Lifecycle
}

// HA is one router's high-availability state: standby or primary, fenced
// or not, and the handoff document's writer.
type HA struct {
	cfg      Config
	rt       Router
	standby  atomic.Bool
	blocked  atomic.Pointer[string]         // why failover or control is blocked; nil or "" when it is not
	follower atomic.Pointer[state.Follower] // while standby
	writer   *Writer
	// named says the document at StatePath names this router's journal
	// run: until it does, a crash would leave this run's admitted
	// requests to no one (lost.go, Admitted).
	named atomic.Bool
}

// New builds the HA side of router rt. It starts nothing: Resume and
// Start do.
func New(cfg Config, rt Router) (*HA, error) {
	if cfg.StandbyOf != "" && cfg.Lease == nil {
		return nil, errors.New("a standby needs a lease: pass --lease-path with --standby-of")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &HA{cfg: cfg, rt: rt}
	h.writer = NewWriter(h.write, cfg.Log.With("path", cfg.StatePath))
	return h, nil
}

// Start takes control, claims the lease, or starts following a primary.
// Without a lease there is nothing to do: the router controls its fleet.
func (h *HA) Start() {
	l := h.cfg.Lease
	if l == nil {
		return
	}
	if h.cfg.StandbyOf != "" {
		h.standby.Store(true)
		h.rt.Background(h.follow)
		return
	}
	if _, err := l.Claim(); err != nil {
		h.Fence(claimReason(err))
		h.cfg.Log.Warn("not serving: the router lease is held elsewhere", "err", err)
		h.rt.Background(h.reclaim)
		return
	}
	h.rt.Background(h.renew)
}

// Close writes any change still pending and releases a valid lease, so a
// standby can take over at once. The router calls it after its background
// work (renewals included) has stopped.
func (h *HA) Close() {
	_ = h.writer.Close()
	if l := h.cfg.Lease; l != nil && l.Valid() {
		_ = l.Release()
	}
}

func claimReason(err error) string {
	var held *state.HeldError
	if errors.As(err, &held) {
		return "lease held by another router"
	}
	return "lease unavailable: " + err.Error()
}

// reclaim retries the lease until it is free (its holder died without a
// standby taking over), then takes control.
func (h *HA) reclaim(ctx context.Context) {
	t := h.cfg.Clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if _, err := h.cfg.Lease.Claim(); err != nil {
			h.Fence(claimReason(err))
			continue
		}
		h.Fence("")
		h.cfg.Log.Info("claimed the router lease", "epoch", h.cfg.Lease.Epoch())
		h.renew(ctx)
		return
	}
}

// renew keeps the lease; losing it fences this router for good: another
// router may already be placing work.
func (h *HA) renew(ctx context.Context) {
	h.cfg.Lease.RunRenewals(ctx, func(err error) {
		h.Fence("lease renewal failed")
		h.cfg.Log.Error("lost the router lease: this router stops placing work", "err", err)
	})
}

// follow shadows the primary until it fails, then takes over with its last
// handoff document.
func (h *HA) follow(ctx context.Context) {
	c := h.cfg
	f := &state.Follower{Primary: c.StandbyOf, Lease: c.Lease, Clock: c.Clock, Engines: c.Engines,
		Policy: c.Fleet.Recovery.EngineRestartPolicy, StatePath: c.StatePath, Logger: c.Log}
	h.follower.Store(f)
	doc, epoch, err := f.Run(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.Fence("standby stopped: " + err.Error())
			c.Log.Error("standby stopped following the primary", "err", err)
		}
		return
	}
	start := c.Clock.Now()
	h.apply(doc)
	// The old primary may be fenced rather than dead, still finishing its
	// requests: close what it left open once they are all past deadline.
	h.closeLost(doc, units.Seconds(c.Fleet.Serving.RequestTimeoutS)+time.Second)
	h.standby.Store(false)
	h.rt.Identify(ctx)
	if !c.Lease.Valid() {
		h.standby.Store(true)
		h.Fence("lease expired during takeover")
		_ = c.Lease.Release()
		return
	}
	c.Log.Info("took over from the primary", "epoch", epoch, "takeover_s", c.Clock.Now().Sub(start).Seconds())
	_ = h.WriteHandoff()
	h.renew(ctx)
}

// Fence records why this router may not place work ("" lifts it). Lease
// renewal fences for good when the lease is lost; a refused claim fences
// until a retry claims it.
func (h *HA) Fence(reason string) { h.blocked.Store(&reason) }

// Blocked is the reason this router is fenced, or "".
func (h *HA) Blocked() string {
	if p := h.blocked.Load(); p != nil {
		return *p
	}
	return ""
}

// Standby says this router is shadowing a primary.
func (h *HA) Standby() bool { return h.standby.Load() }

// Controls says this router places work: it is not a standby, and its
// lease, when it has one, is valid.
func (h *HA) Controls() bool {
	if h.standby.Load() {
		return false
	}
	return h.cfg.Lease == nil || h.cfg.Lease.Valid()
}

// NotControlling is why this router may not place work, or "" when it
// may: fenced, failover blocked, shadowing, or its lease expired.
func (h *HA) NotControlling() string {
	if b := h.Blocked(); b != "" {
		return b
	}
	standby := h.standby.Load()
	if f := h.follower.Load(); f != nil && standby {
		if b := f.FailoverBlocked(); b != "" {
			return b
		}
	}
	switch {
	case standby:
		return "shadowing"
	case h.cfg.Lease != nil && !h.cfg.Lease.Valid():
		return "lease expired"
	}
	return ""
}

// Fenced says /health should call this router fenced: blocked, or a
// primary whose lease is no longer valid.
func (h *HA) Fenced() bool {
	l := h.cfg.Lease
	return h.Blocked() != "" || (!h.standby.Load() && l != nil && !l.Valid())
}

// LeaseIdentity is the lease's epoch and holder token, zero without one.
func (h *HA) LeaseIdentity() (int, string) {
	if h.cfg.Lease == nil {
		return 0, ""
	}
	return h.cfg.Lease.Epoch(), h.cfg.Lease.Holder()
}
