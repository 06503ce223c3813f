package metrics

import (
	"slices"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Pools is the pool view the router publishes after each scheduling
// snapshot: role membership, SLO-relative loads (1.0 = at target),
// resident requests per engine, and the ejected engines.
type Pools struct {
	Prefill, Decode         []string // iids per role
	PrefillLoad, DecodeLoad float64
	Resident                map[string]Resident
	Ejected                 []string
}

// Resident counts the requests resident on one engine, by phase.
type Resident struct{ Prefill, Decode int }

func newPools(b builder, cfg *fleet.Config) *pools {
	p := &pools{
		iids:      map[string]bool{},
		instances: b.gaugeVec("narwhal_pool_instances", "Engines per role.", "role"),
		load:      b.gaugeVec("narwhal_pool_load", "Pool load divided by its own SLO target (1.0 = at target).", "role"),
		role:      b.gaugeVec("narwhal_instance_role", "1 on each engine's current role (aggregated: decode engines also report prefill).", "iid", "role"),
		resident:  b.gaugeVec("narwhal_resident_requests", "Requests resident on each engine, by phase.", "iid", "phase"),
		ejected:   b.gaugeVec("narwhal_ejected", "1 while the engine is ejected.", "iid"),
		ejectedN:  b.gauge("narwhal_ejected_instances", "Number of ejected engines."),
	}
	var start Pools
	for _, e := range cfg.Engines {
		if e.Role == fleet.Prefill {
			start.Prefill = append(start.Prefill, e.IID)
		} else {
			start.Decode = append(start.Decode, e.IID)
		}
	}
	p.set(start)
	return p
}

// SetPools publishes a pool view. Engines seen before and absent now read
// 0 rather than disappearing, so a panel never loses a line mid-incident.
func (m *Metrics) SetPools(v Pools) { m.pools.set(v) }

func (p *pools) set(v Pools) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range [][]string{v.Prefill, v.Decode, v.Ejected} {
		for _, iid := range list {
			p.iids[iid] = true
		}
	}
	for iid := range v.Resident {
		p.iids[iid] = true
	}
	p.instances.WithLabelValues(string(fleet.Prefill)).Set(float64(len(v.Prefill)))
	p.instances.WithLabelValues(string(fleet.Decode)).Set(float64(len(v.Decode)))
	p.load.WithLabelValues(string(fleet.Prefill)).Set(v.PrefillLoad)
	p.load.WithLabelValues(string(fleet.Decode)).Set(v.DecodeLoad)
	p.ejectedN.Set(float64(len(v.Ejected)))
	aggregated := len(v.Prefill) == 0
	for iid := range p.iids {
		inDecode := slices.Contains(v.Decode, iid)
		p.role.WithLabelValues(iid, string(fleet.Prefill)).Set(b2f(slices.Contains(v.Prefill, iid) || (aggregated && inDecode)))
		p.role.WithLabelValues(iid, string(fleet.Decode)).Set(b2f(inDecode))
		r := v.Resident[iid]
		p.resident.WithLabelValues(iid, string(fleet.Prefill)).Set(float64(r.Prefill))
		p.resident.WithLabelValues(iid, string(fleet.Decode)).Set(float64(r.Decode))
		p.ejected.WithLabelValues(iid).Set(b2f(slices.Contains(v.Ejected, iid)))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
