package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Prefix-cache placement series: how often prefill was priced warm, and
// the cached tokens predicted from residency against those the engine
// reported for the same legs (a growing gap means stale or wrong
// residency, e.g. a hash seed mismatch).
type cache struct {
	placements          *prometheus.CounterVec
	predicted, reported *prometheus.CounterVec
	known               *prometheus.GaugeVec
}

func newCache(b builder, cfg *fleet.Config) *cache {
	perEngine := func(name, help string) *prometheus.CounterVec {
		v := b.counterVec(name, help, "iid")
		for _, e := range cfg.Engines {
			seed(v, e.IID)
		}
		return v
	}
	c := &cache{placements: b.counterVec("narwhal_cache_placements_total",
		"Prefill placements by pricing: warm (cache evidence lowered the price) or cold.", "pricing")}
	seed(c.placements, "warm", "cold")
	c.predicted = perEngine("narwhal_cache_predicted_tokens_total", "Cached prompt tokens the router predicted on the engine it placed a warm prefill on.")
	c.reported = perEngine("narwhal_cache_reported_tokens_total", "Cached prompt tokens engines reported (usage.prompt_tokens_details) for prefill legs.")
	c.known = b.gaugeVec("narwhal_residency_known", "1 while the router knows the engine's prefix-cache residency, else 0 (priced cold).", "iid")
	for _, e := range cfg.Engines {
		c.known.WithLabelValues(e.IID)
	}
	return c
}

// CachePlaced counts one prefill placement; predicted is the cached
// tokens a warm placement was priced with (0 when cold).
func (m *Metrics) CachePlaced(iid string, warm bool, predicted int) {
	if !warm {
		m.cache.placements.WithLabelValues("cold").Inc()
		return
	}
	m.cache.placements.WithLabelValues("warm").Inc()
	m.cache.predicted.WithLabelValues(iid).Add(float64(predicted))
}

// CacheReported adds the cached tokens an engine reported for a prefill.
func (m *Metrics) CacheReported(iid string, tokens int) {
	m.cache.reported.WithLabelValues(iid).Add(float64(max(tokens, 0)))
}

// SetResidencyKnown publishes whether iid's residency is known.
func (m *Metrics) SetResidencyKnown(iid string, known bool) {
	v := 0.0
	if known {
		v = 1
	}
	m.cache.known.WithLabelValues(iid).Set(v)
}
