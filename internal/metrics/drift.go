package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Drift health series (runtime.md §6, Health row; operations §7).
type drift struct {
	probation, paused            *prometheus.GaugeVec
	scored, undersampled, pauses *prometheus.CounterVec

	mu   sync.Mutex // guards seen
	seen map[string][3]int
}

func newDrift(b builder, cfg *fleet.Config) *drift {
	d := &drift{
		probation:    b.gaugeVec("narwhal_probation_instances", "1 while the engine is on drift probation (a placement penalty).", "iid"),
		paused:       b.gaugeVec("narwhal_health_prefill_paused", "1 when the engine's last pass did prefill work, so its decode pace was not scored.", "iid"),
		scored:       b.counterVec("narwhal_health_windows_scored_total", "Drift windows scored per engine (recovery.health.window_s).", "iid"),
		undersampled: b.counterVec("narwhal_health_windows_undersampled_total", "Drift windows with fewer than recovery.health.min_samples residuals.", "iid"),
		pauses:       b.counterVec("narwhal_health_prefill_pauses_total", "Monitor passes whose decode pace was not scored because of prefill work.", "iid"),
		seen:         map[string][3]int{},
	}
	for _, e := range cfg.Engines {
		d.probation.WithLabelValues(e.IID)
		d.paused.WithLabelValues(e.IID)
		seed(d.scored, e.IID)
		seed(d.undersampled, e.IID)
		seed(d.pauses, e.IID)
	}
	return d
}

// SetDrift publishes one engine's drift tracker state; the counts are
// the tracker's running totals, and the counters move by what they grew.
func (m *Metrics) SetDrift(iid string, probation, paused bool, scored, undersampled, pauses int) {
	d := m.drift
	d.probation.WithLabelValues(iid).Set(b2f(probation))
	d.paused.WithLabelValues(iid).Set(b2f(paused))
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.seen[iid]
	now := [3]int{scored, undersampled, pauses}
	for k, c := range []*prometheus.CounterVec{d.scored, d.undersampled, d.pauses} {
		if now[k] > prev[k] {
			c.WithLabelValues(iid).Add(float64(now[k] - prev[k]))
		}
	}
	d.seen[iid] = now
}
