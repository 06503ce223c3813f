package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Output tiers (ADR-006 §4), spelled here so every series exists from
// start; qualified_solution is reserved and never set.
var endpointTiers = []string{"none", "candidate", "conservative", "recommended_endpoint", "qualified_solution"}

func newTiers(b builder, cfg *fleet.Config) *prometheus.GaugeVec {
	g := b.gaugeVec("narwhal_endpoint_tier", "1 on each engine endpoint's current output tier, derived from the evidence store.", "iid", "tier")
	for _, e := range cfg.Engines {
		for _, t := range endpointTiers {
			g.WithLabelValues(e.IID, t).Set(b2f(t == "none"))
		}
	}
	return g
}

// SetEndpointTier publishes an engine endpoint's current tier.
func (m *Metrics) SetEndpointTier(iid, tier string) {
	for _, t := range endpointTiers {
		m.tiers.WithLabelValues(iid, t).Set(b2f(t == tier))
	}
}
