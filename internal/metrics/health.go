package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Engine health and lifecycle series (runtime.md §6, Health and
// Lifecycle rows).
type health struct {
	ejections, readmissions *prometheus.CounterVec
	streak                  *prometheus.GaugeVec
	state                   *prometheus.GaugeVec
	draining                *prometheus.GaugeVec
	held                    *prometheus.GaugeVec
}

// Breaker classes and lifecycle states, as the lifecycle package names
// them; spelled here so every series exists from start.
var (
	breakerClasses  = []string{"connection", "timeout", "overload", "inference_status", "kv_handoff", "stream", "liveness", "output_cut"}
	lifecycleStates = []string{"active", "draining", "drained", "deadline_exceeded", "validating", "blocked"}
	ejectionCauses  = []string{"connection", "liveness", "drift", "process_identity", "profile_generation", "output_cut"}
	readmitEvidence = []string{"health", "verification", "lifecycle"}
	holdCauses      = []string{"incompatible-build", "incompatible-kv", "engine-auth"}
)

func newHealth(b builder, cfg *fleet.Config) health {
	h := health{
		ejections:    b.counterVec("narwhal_engine_ejections_total", "Engines taken out of placement, by engine and cause.", "iid", "cause"),
		readmissions: b.counterVec("narwhal_engine_readmissions_total", "Engines returned to placement, by engine and evidence.", "iid", "evidence"),
		streak:       b.gaugeVec("narwhal_engine_breaker_streak", "Consecutive failures of each breaker class per engine.", "iid", "class"),
		state:        b.gaugeVec("narwhal_engine_lifecycle_state", "1 on each engine's current lifecycle state.", "iid", "state"),
		draining:     b.gaugeVec("narwhal_engine_draining", "1 while the engine is held out by a drain or its validation.", "iid"),
		held:         b.gaugeVec("narwhal_engine_held", "1 while the engine is held out for cause, even the last of its role (another build, refused KV, a refused credential).", "iid", "cause"),
	}
	for _, e := range cfg.Engines {
		for _, c := range breakerClasses {
			h.streak.WithLabelValues(e.IID, c)
		}
		for _, s := range lifecycleStates {
			h.state.WithLabelValues(e.IID, s).Set(b2f(s == "active"))
		}
		h.draining.WithLabelValues(e.IID)
		for _, c := range ejectionCauses {
			h.ejections.WithLabelValues(e.IID, c)
		}
		for _, ev := range readmitEvidence {
			h.readmissions.WithLabelValues(e.IID, ev)
		}
		for _, c := range holdCauses {
			h.held.WithLabelValues(e.IID, c)
		}
	}
	return h
}

// Ejection counts an engine leaving placement.
func (m *Metrics) Ejection(iid, cause string) { m.health.ejections.WithLabelValues(iid, cause).Inc() }

// Readmission counts an engine returning to placement.
func (m *Metrics) Readmission(iid, evidence string) {
	m.health.readmissions.WithLabelValues(iid, evidence).Inc()
}

// SetStreak publishes one breaker streak.
func (m *Metrics) SetStreak(iid, class string, n int) {
	m.health.streak.WithLabelValues(iid, class).Set(float64(n))
}

// SetLifecycleState publishes an engine's lifecycle state.
func (m *Metrics) SetLifecycleState(iid, state string) {
	for _, s := range lifecycleStates {
		m.health.state.WithLabelValues(iid, s).Set(b2f(s == state))
	}
	m.health.draining.WithLabelValues(iid).Set(b2f(state != "active"))
}

// SetHeld publishes whether an engine is held out for cause.
func (m *Metrics) SetHeld(iid, cause string, held bool) {
	m.health.held.WithLabelValues(iid, cause).Set(b2f(held))
}
