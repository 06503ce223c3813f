package metrics

import (
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/prometheus/client_golang/prometheus"
)

// Failed counts a request that ended in error (journal.Reason* values).
func (m *Metrics) Failed(reason string) { m.failed.WithLabelValues(reason).Inc() }

// Expired counts a request that ran out of time (deadline, queue_timeout, handoff).
func (m *Metrics) Expired(reason string) { m.expired.WithLabelValues(reason).Inc() }

// Refused counts a predictive refusal by cause (journal.Cause*; the three
// decode causes stay distinct here, unlike the journal's refused_cause).
func (m *Metrics) Refused(cause string) { m.refused.WithLabelValues(cause).Inc() }

// Rejected counts an ingress 429 or readiness 503 (inflight_limit, saturated, not_ready).
func (m *Metrics) Rejected(reason string) { m.rejected.WithLabelValues(reason).Inc() }

// AttemptFailed counts one failed attempt in phase (admission, queue,
// prefill, decode) for reason.
func (m *Metrics) AttemptFailed(phase fault.Phase, reason fault.Reason) {
	m.attemptFailures.WithLabelValues(string(phase), string(reason)).Inc()
}

// Upstream adds the seconds of one HTTP leg (failed legs too) to phase.
func (m *Metrics) Upstream(phase fault.Phase, seconds float64) {
	m.upstream.WithLabelValues(string(phase)).Add(seconds)
}

// Flip counts an applied role flip by decider (reactive, decode_floor,
// floor_recovery) to role (prefill, decode).
func (m *Metrics) Flip(by, to string) { m.flips.WithLabelValues(by, to).Inc() }

// FlipInflight adds the requests resident in phase on an engine that flipped.
func (m *Metrics) FlipInflight(phase fault.Phase, n int) {
	m.flipInflight.WithLabelValues(string(phase)).Add(float64(n))
}

// Decision counts a controller evaluation by decider and result
// (applied, held, blocked, advisory).
func (m *Metrics) Decision(by, result string) { m.decisions.WithLabelValues(by, result).Inc() }

// ObserveTTFT records a request's TTFT in seconds.
func (m *Metrics) ObserveTTFT(s float64) { m.ttft.Observe(s) }

// ObserveTPOT records a request's TPOT in seconds (skip it below 2 tokens).
func (m *Metrics) ObserveTPOT(s float64) { m.tpot.Observe(s) }

// ObserveSeat records how long a request held its admission seat.
func (m *Metrics) ObserveSeat(s float64) { m.seat.Observe(s) }

// ObserveQueueWait records a request's wait at stage (admission, prefill,
// decode), once per stage reached.
func (m *Metrics) ObserveQueueWait(stage fault.Phase, s float64) {
	m.queueWait.WithLabelValues(string(stage)).Observe(s)
}

// Outcomes are outcome counters restored from a handoff (§3.7). Reason
// maps may hold "unclassified" for a total the handoff did not explain.
type Outcomes struct {
	Offered, UnsizedOffered, Served, SLOMet float64
	Cancelled, Invalid, Unserved            float64
	Failed, Expired, Refused, Rejected      map[string]float64
}

// Restore adds restored outcome counts: a resume's handoff counters, then
// the old run's outcomes the handoff had not counted yet.
func (m *Metrics) Restore(o Outcomes) {
	m.Offered.Add(o.Offered)
	m.UnsizedOffered.Add(o.UnsizedOffered)
	m.Served.Add(o.Served)
	m.SLOMet.Add(o.SLOMet)
	m.Cancelled.Add(o.Cancelled)
	m.Invalid.Add(o.Invalid)
	m.Unserved.Add(o.Unserved)
	for vec, byLabel := range map[*prometheus.CounterVec]map[string]float64{
		m.failed: o.Failed, m.expired: o.Expired, m.refused: o.Refused, m.rejected: o.Rejected,
	} {
		for label, n := range byLabel {
			vec.WithLabelValues(label).Add(n)
		}
	}
}
