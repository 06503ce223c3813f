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
	Rng     ports.Rng       // reclaim jitter; nil: seeded from the lease's holder token
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
	rng      ports.Rng // reclaim jitter; only the one lease loop draws from it
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
	h := &HA{cfg: cfg, rt: rt, rng: cfg.Rng}
	if h.rng == nil && cfg.Lease != nil {
		h.rng = ports.NewSeededRng(holderSeed(cfg.Lease.Holder()))
	}
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
		h.rt.Background(func(ctx context.Context) {
			if h.regain(ctx, "") {
				h.hold(ctx)
			}
		})
		return
	}
	h.claimed()
	h.rt.Background(h.hold)
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

// hold keeps the lease this router claimed: it renews until a renewal
// fails, then fences and claims again (regain) until it holds the lease
// once more or ctx ends. A lost lease used to fence for good; an outage
// of the lease store longer than ttl − margin then left no router
// serving unless a standby was still following.
func (h *HA) hold(ctx context.Context) {
	for {
		h.cfg.Lease.RunRenewals(ctx, func(err error) {
			h.Fence(retrying(causeRenewal, nil))
			h.cfg.Log.Error("lost the router lease: this router stops placing work and claims it again", "err", err)
		})
		if ctx.Err() != nil || !h.regain(ctx, causeRenewal) {
			return
		}
		h.control(ctx)
	}
}

// Why a router that held or was taking the lease is fenced while it
// claims again.
const (
	causeRenewal = "lease renewal failed"
	causeExpired = "lease expired during takeover"
)

// retrying is the fence reason while regain claims after cause; "" is a
// router that never held the lease (claimReason alone, as at start).
func retrying(cause string, err error) string {
	var held *state.HeldError
	switch {
	case cause == "":
		return claimReason(err)
	case errors.As(err, &held):
		return cause + "; lease held by another router; retrying"
	}
	return cause + "; retrying"
}

// regain claims the lease until it holds it (true) or ctx ends (false),
// fenced meanwhile with why. Claim refuses while another router holds a
// valid lease, so a router that lost its lease to a standby stays fenced
// until that one stops renewing; a claim after a loss takes a new epoch,
// so writes of the lost term stay refused.
func (h *HA) regain(ctx context.Context, cause string) bool {
	l, b := h.cfg.Lease, h.newBackoff()
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return false
		case <-h.cfg.Clock.After(b.next()):
		}
		if _, err := l.Claim(); err != nil {
			h.Fence(retrying(cause, err))
			h.cfg.Log.Debug("router lease claim refused", "attempt", attempt, "err", err)
			continue
		}
		h.claimed()
		h.Fence("")
		if h.cfg.Metrics != nil {
			h.cfg.Metrics.LeaseReacquired.Inc()
		}
		h.cfg.Log.Info("claimed the router lease", "epoch", l.Epoch(), "attempts", attempt, "after", cause)
		return true
	}
}

// claimed publishes the epoch just claimed.
func (h *HA) claimed() {
	if h.cfg.Metrics != nil {
		h.cfg.Metrics.LeaseEpoch.Set(float64(h.cfg.Lease.Epoch()))
	}
}

// control is what a router does when it takes control of the fleet
// without following a primary: the document another router wrote
// meanwhile, if any (adopt), the process identity check, then its own
// handoff document under the new epoch (as follow does after a takeover).
func (h *HA) control(ctx context.Context) {
	h.adopt()
	h.standby.Store(false)
	h.rt.Identify(ctx)
	if err := h.WriteHandoff(); err != nil {
		h.cfg.Log.Warn("could not write the handoff after claiming the lease", "err", err)
	}
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
			c.Log.Error("standby stopped following the primary; it claims the lease when it is free", "err", err)
			h.follower.Store(nil)
			h.standby.Store(false)
			h.takeControl(ctx, "standby stopped: "+err.Error())
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
		// The document is applied and the old run's requests are being
		// closed: what is left is holding the lease, so claim it again
		// rather than stay fenced.
		c.Log.Warn("the lease expired during the takeover; claiming it again", "epoch", epoch)
		_ = c.Lease.Release()
		h.takeControl(ctx, causeExpired)
		return
	}
	h.claimed()
	c.Log.Info("took over from the primary", "epoch", epoch, "takeover_s", c.Clock.Now().Sub(start).Seconds())
	_ = h.WriteHandoff()
	h.hold(ctx)
}

// takeControl fences with cause, claims the lease until it holds it, then
// controls the fleet and keeps the lease.
func (h *HA) takeControl(ctx context.Context, cause string) {
	h.Fence(retrying(cause, nil))
	if h.regain(ctx, cause) {
		h.control(ctx)
		h.hold(ctx)
	}
}

// Fence records why this router may not place work ("" lifts it). A lost
// lease or a refused claim fences until a later claim takes the lease.
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

// Following is what the standby knows of its primary, or nil when this
// router is not following one.
func (h *HA) Following() *state.FollowerStatus {
	f := h.follower.Load()
	if f == nil || !h.standby.Load() {
		return nil
	}
	st := f.Status()
	return &st
}

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

// backoff paces a fenced router's claims: the first after about one
// renew interval, then doubling up to ttl − margin (about the lease
// period, so a lease freed or a store come back is claimed within two
// periods), each drawn from [d/2, d] so routers fenced by one outage do
// not claim in lockstep. It is not cenkalti/backoff (already in the
// module graph): that library draws its jitter from math/rand's global
// source (backoff/v5 exponential.go, NextBackOff), with no way to hand it
// a seeded ports.Rng, and the lease tests replay the claims' timing from
// a seed; the rule itself is the three lines below.
type backoff struct {
	d, max time.Duration
	rng    ports.Rng
}

func (h *HA) newBackoff() *backoff {
	ttl, renew, margin := h.cfg.Lease.Timing()
	return &backoff{d: renew, max: ttl - margin, rng: h.rng}
}

// next is the wait before the next claim.
func (b *backoff) next() time.Duration {
	d := b.d
	b.d = min(2*b.d, b.max)
	return d/2 + time.Duration(b.rng.Float64()*float64(d/2))
}

// holderSeed seeds the reclaim jitter from the holder token's random
// hex, so two routers draw different delays without a clock read.
func holderSeed(holder string) uint64 {
	var seed uint64
	for _, c := range holder {
		seed = seed*31 + uint64(c)
	}
	return seed
}
