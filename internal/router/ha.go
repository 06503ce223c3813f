package router

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/units"
)

// HA configures durable state and the fenced lease.
type HA struct {
	// StatePath is where the handoff document is written; "" disables it.
	StatePath string
	// Resume applies the document at StatePath at start.
	Resume bool
	// Lease, when set, fences this router: it places work only while it
	// holds the lease.
	Lease *state.Lease
	// StandbyOf is the primary's base URL: start as a warm standby that
	// follows it and takes over when its lease expires. Needs Lease.
	StandbyOf string
}

// haState is the router's side of high availability.
type haState struct {
	standby atomic.Bool
	blocked atomic.Value // string: why failover or control is blocked
}

func (h *haState) blockedReason() string {
	s, _ := h.blocked.Load().(string)
	return s
}

// startHA takes control, claims the lease, or starts following a primary.
func (r *Router) startHA() {
	if r.lease == nil {
		return
	}
	if r.standbyOf != "" {
		r.ha.standby.Store(true)
		r.background(r.follow)
		return
	}
	if _, err := r.lease.Claim(); err != nil {
		r.ha.blocked.Store(claimReason(err))
		r.log.Warn("not serving: the router lease is held elsewhere", "err", err)
		r.background(r.reclaim)
		return
	}
	r.background(r.renew)
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
func (r *Router) reclaim(ctx context.Context) {
	t := r.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if _, err := r.lease.Claim(); err != nil {
			r.ha.blocked.Store(claimReason(err))
			continue
		}
		r.ha.blocked.Store("")
		r.log.Info("claimed the router lease", "epoch", r.lease.Epoch())
		r.renew(ctx)
		return
	}
}

// renew keeps the lease; losing it fences this router for good: another
// router may already be placing work.
func (r *Router) renew(ctx context.Context) {
	r.lease.RunRenewals(ctx, func(err error) {
		r.ha.blocked.Store("lease renewal failed")
		r.log.Error("lost the router lease: this router stops placing work", "err", err)
	})
}

// follow shadows the primary until it fails, then takes over with its last
// handoff document.
func (r *Router) follow(ctx context.Context) {
	f := &state.Follower{Primary: r.standbyOf, Lease: r.lease, Clock: r.clock, Engines: r.order,
		Policy: r.cfg.Recovery.EngineRestartPolicy, StatePath: r.statePath, Logger: r.log}
	r.follower.Store(f)
	doc, epoch, err := f.Run(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.ha.blocked.Store("standby stopped: " + err.Error())
			r.log.Error("standby stopped following the primary", "err", err)
		}
		return
	}
	start := r.clock.Now()
	r.apply(doc)
	// The old primary may be fenced rather than dead, still finishing its
	// requests: close what it left open once they are all past deadline.
	r.closeLost(doc, units.Seconds(r.cfg.Serving.RequestTimeoutS)+time.Second)
	r.ha.standby.Store(false)
	r.captureIdentities(ctx)
	if !r.lease.Valid() {
		r.ha.standby.Store(true)
		r.ha.blocked.Store("lease expired during takeover")
		_ = r.lease.Release()
		return
	}
	r.log.Info("took over from the primary", "epoch", epoch, "takeover_s", r.clock.Now().Sub(start).Seconds())
	_ = r.writeHandoff()
	r.renew(ctx)
}

// controlsFleet: this router places work — it is not a standby, and its
// lease, when it has one, is valid.
func (r *Router) controlsFleet() bool {
	if r.ha.standby.Load() {
		return false
	}
	return r.lease == nil || r.lease.Valid()
}

// notControlling is the reason a router that does not control the fleet
// gives, or "".
func (r *Router) notControlling() string {
	if b := r.ha.blockedReason(); b != "" {
		return b
	}
	if f, ok := r.follower.Load().(*state.Follower); ok && r.ha.standby.Load() {
		if b := f.FailoverBlocked(); b != "" {
			return b
		}
	}
	switch {
	case r.ha.standby.Load():
		return "shadowing"
	case r.lease != nil && !r.lease.Valid():
		return "lease expired"
	}
	return ""
}

// healthStatus is /health's status word.
func (r *Router) healthStatus() string {
	switch {
	case r.ready():
		return "ok"
	case r.ha.blockedReason() != "" || (!r.ha.standby.Load() && r.lease != nil && !r.lease.Valid()):
		return "fenced"
	case r.ha.standby.Load():
		return "standby"
	case r.waveBlocked() != "":
		return "maintenance"
	}
	return "degraded"
}

func (r *Router) leaseIdentity() (int, string) {
	if r.lease == nil {
		return 0, ""
	}
	return r.lease.Epoch(), r.lease.Holder()
}

// serveHealth is process liveness: always 200, with the router's status.
func (r *Router) serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{"status": r.healthStatus(), "instances": len(r.order), "available_instances": r.liveCount()})
}

// serveReady is load-balancer readiness: 200 only when this router
// controls the fleet, knows its engines and has one live.
func (r *Router) serveReady(w http.ResponseWriter, _ *http.Request) {
	reason, ready := r.readiness()
	if r.closing.Load() {
		reason, ready = "shutting down", false
	}
	epoch, holder := r.leaseIdentity()
	body := map[string]any{"status": "ready", "control_ready": r.controlsFleet(), "epoch": epoch, "holder": holder, "reason": reason,
		"held": r.life.Holds()}
	if !ready {
		body["status"] = "not_ready"
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 503, body)
		return
	}
	writeJSON(w, 200, body)
}
