package router

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// seedConservative stores a fitting prediction and a healthy boot of p0
// on the same artifact and hardware class: p0 is conservative.
func seedConservative(t *testing.T, dir string) {
	t.Helper()
	clock := ports.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	art := "1220" + "ab00000000000000000000000000000000000000000000000000000000000000"
	fits, healthy, margin := evidence.VerdictFits, evidence.VerdictHealthy, float64(8<<30)
	pred := evidence.Record{Kind: evidence.KindPrediction, ClaimScope: evidence.ScopeMemory, EpistemicStatus: evidence.Predicted,
		Level: evidence.CalculatedOnly, Subject: map[string]string{evidence.SubjectArtifact: art, evidence.SubjectHardwareClass: "hw"},
		Claim:  evidence.Claim{Quantity: "memory_fit", Verdict: &fits, Value: &margin, Unit: "bytes"},
		Engine: evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}}, Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}},
		Display: map[string]any{"stated_margin_bytes": float64(1 << 30)}}
	boot := evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level:   evidence.MaintainerLabMeasured,
		Subject: map[string]string{evidence.SubjectArtifact: art, evidence.SubjectHardwareClass: "hw", evidence.SubjectEndpoint: "fp0"},
		Claim:   evidence.Claim{Quantity: "boot", Verdict: &healthy}, Engine: evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: map[string]any{"engine_iid": "p0"}}
	st := store.Open(dir)
	for _, r := range []evidence.Record{pred, boot} {
		if _, err := st.PutRecord(evidence.Stamp(r, clock)); err != nil {
			t.Fatal(err)
		}
	}
}

// The router's evidence pass publishes each endpoint's tier in
// /narwhal/state.evidence and narwhal_endpoint_tier.
func TestEvidencePassPublishesTiers(t *testing.T) {
	dir := t.TempDir()
	seedConservative(t, dir)
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, nil, func(o *Options) {
		o.Evidence = EvidenceOptions{Store: dir, Interval: time.Hour}
	})
	deadline := time.Now().Add(5 * time.Second)
	var st routerdoc.StateDoc
	for time.Now().Before(deadline) {
		if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Evidence.UpdatedAt != "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !st.Evidence.Enabled || st.Evidence.Error != "" {
		t.Fatalf("evidence state %+v, want an enabled pass without error", st.Evidence)
	}
	if got := st.Evidence.Endpoints["p0"]; got.Tier != "conservative" || got.Endpoint != "fp0" {
		t.Fatalf("p0 %+v, want conservative at fp0", got)
	}
	if got := st.Evidence.Endpoints["d0"].Tier; got != "none" {
		t.Fatalf("d0 tier %q, want none (no records)", got)
	}
	if v := h.gauge(t, "narwhal_endpoint_tier", map[string]string{"iid": "p0", "tier": "conservative"}); v != 1 {
		t.Fatalf("narwhal_endpoint_tier{p0,conservative} = %v, want 1", v)
	}
}

func TestEvidenceOffByDefault(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, nil)
	var st routerdoc.StateDoc
	if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Evidence.Enabled {
		t.Fatal("evidence pass enabled without a store")
	}
}
