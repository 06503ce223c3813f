package sim

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
)

// Link prices the KV handoff between two engines: latency plus the
// prompt's KV bytes over the link bandwidth. Decode on the producer pays
// nothing.
type Link struct {
	BytesPerToken  float64 `json:"bytes_per_token"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	LatencyS       float64 `json:"latency_s"`
}

// TransferS is the seconds to move tokens of KV across the link.
func (l Link) TransferS(tokens int) float64 {
	if tokens <= 0 {
		return l.LatencyS
	}
	return l.LatencyS + float64(tokens)*l.BytesPerToken/l.BytesPerSecond
}

// Shape sizes every engine's batch scheduler (vLLM's flags).
type Shape struct {
	KVCapacityTokens int `json:"kv_capacity_tokens"`
	BlockSize        int `json:"block_size"`
	MaxNumSeqs       int `json:"max_num_seqs"`
	MaxBatchedTokens int `json:"max_batched_tokens"`
}

// Fleet is the simulated fleet: identical engines e00, e01, … sharing one
// profile row shape, an SLO and a KV link.
type Fleet struct {
	Engines int       `json:"engines"`
	SLO     fleet.SLO `json:"slo"`
	Shape   Shape     `json:"shape"`
	Link    Link      `json:"link"`
	// PrefixCaching gives every engine a prefix cache (vLLM's default).
	PrefixCaching bool `json:"prefix_caching,omitempty"`
	// BatchedPrefill makes a prefill step of several requests pay the
	// profile's intercept once (enginemodel.Config.StepOverheadS), as
	// simengine's and vLLM's steps do; off, each request pays its whole
	// price (the moving demo's published tables).
	BatchedPrefill bool `json:"batched_prefill,omitempty"`
	// DrainS bounds how long the simulation runs after the last arrival;
	// requests still open then count as unfinished misses.
	DrainS float64 `json:"drain_s"`
	// Profile returns engine iid's timing row.
	Profile func(iid string) profile.Row `json:"-"`
	// Configure edits the fleet document before validation (pins, floors,
	// thresholds); nil keeps fleet.Defaults.
	Configure func(*fleet.Config) `json:"-"`
	// Outages take engines out of placement for a while, as an ejection
	// or an operator's drain does: resident work finishes, nothing new is
	// placed there until the outage ends.
	Outages []Outage `json:"outages,omitempty"`
}

// Outage is engine Engine (an index: IID(Engine)) out of placement from
// FromS to ToS seconds of virtual time.
type Outage struct {
	Engine int     `json:"engine"`
	FromS  float64 `json:"from_s"`
	ToS    float64 `json:"to_s"`
}

// DemoFleet is the fleet make demo runs: n engines of DemoProfile, a 2 s
// TTFT and 60 ms TPOT target, and a 400 Gb/s RDMA link.
func DemoFleet(n int) Fleet {
	return Fleet{
		Engines: n,
		SLO:     fleet.SLO{TTFT: 2.0, TPOT: 0.06},
		Shape:   Shape{KVCapacityTokens: 65536, BlockSize: 16, MaxNumSeqs: 128, MaxBatchedTokens: 8192},
		// 70B-class KV: 80 layers × 8 KV heads × 128 dims × K and V × 2 bytes.
		Link:    Link{BytesPerToken: 327680, BytesPerSecond: 50e9, LatencyS: 0.002},
		DrainS:  120,
		Profile: DemoProfile,
	}
}

// DemoProfile is a 70B-class engine on one tensor-parallel H100 node:
// about 0.5 s to prefill 1,500 tokens and a 30 ms decode floor. It is
// slower per engine than simengine.DefaultProfile on purpose: the demo
// needs minutes of simulated traffic for the controller's evidence
// windows, and a slower engine reaches them with fewer simulated tokens.
func DemoProfile(iid string) profile.Row {
	one, maxReq, minKV, maxKV := 1, 128, 256, 65536
	rs, fit, cv := 1e-4, 0.02, 0.04
	return profile.Row{IID: iid, TTFTA: 4e-8, TTFTB: 2.4e-4, TTFTC: 0.03,
		TPOTSlope: 6e-7, TPOTIntercept: 0.03, TPOTRequestSlope: &rs,
		DecodeMinRequests: &one, DecodeMaxRequests: &maxReq, DecodeMinKVTokens: &minKV, DecodeMaxKVTokens: &maxKV,
		KVCapacityTokens: &maxKV, DecodeFitMAPE: &fit, DecodeCVMAPE: &cv}
}

// IID names engine k; zero-padded so that sched's iid order is k order.
func IID(k int) string { return fmt.Sprintf("e%02d", k) }

func (f Fleet) check() error {
	switch {
	case f.Engines < 1 || f.Engines > 99:
		return fmt.Errorf("sim: %d engines: simulate between 1 and 99", f.Engines)
	case f.Profile == nil:
		return fmt.Errorf("sim: fleet has no Profile: pass sim.DemoProfile or simengine.DefaultProfile")
	case !(f.Link.BytesPerSecond > 0) || f.Link.BytesPerToken < 0 || f.Link.LatencyS < 0:
		return fmt.Errorf("sim: KV link needs a positive bandwidth and nonnegative size and latency")
	case !(f.DrainS >= 0):
		return fmt.Errorf("sim: drain_s must be nonnegative")
	}
	for k, o := range f.Outages {
		if o.Engine < 0 || o.Engine >= f.Engines || !(o.FromS >= 0) || !(o.ToS > o.FromS) {
			return fmt.Errorf("sim: outages[%d]: engine %d from %gs to %gs: name an engine below %d and a window with to_s after from_s >= 0",
				k, o.Engine, o.FromS, o.ToS, f.Engines)
		}
		for j, p := range f.Outages[:k] {
			if p.Engine == o.Engine && o.FromS < p.ToS && p.FromS < o.ToS {
				return fmt.Errorf("sim: outages[%d] overlaps outages[%d] of engine %d: merge them into one window", k, j, o.Engine)
			}
		}
	}
	return nil
}

// document builds the validated fleet document and profile store for arm:
// the first prefill engines are labelled prefill, the rest decode.
func (f Fleet) document(prefill int) (*fleet.Config, *profile.Store, error) {
	if err := f.check(); err != nil {
		return nil, nil, err
	}
	cfg := fleet.Defaults()
	cfg.Model = "narwhal/sim"
	cfg.SLO = f.SLO
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for k := 0; k < f.Engines; k++ {
		role := fleet.Decode
		if k < prefill {
			role = fleet.Prefill
		}
		iid := IID(k)
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: "http://sim.invalid/" + iid, Role: role})
		store.Profiles = append(store.Profiles, f.Profile(iid))
	}
	if f.Configure != nil {
		f.Configure(&cfg)
	}
	if err := cfg.Validate("sim"); err != nil {
		return nil, nil, fmt.Errorf("sim: fleet document: %w", err)
	}
	return &cfg, store, nil
}

// DemoSegmentS is the length of each of the demo trace's three phases.
const DemoSegmentS = 120

// DemoRates are the demo's offered rates for eight engines, requests per
// second: from where most static splits still hold to where every arm
// falls below 90%.
func DemoRates() []float64 { return []float64{7, 8, 9, 10, 11, 12, 13, 14, 15} }
