package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func testFleet(contract bool) *fleet.Config {
	c := fleet.Defaults()
	c.Engines = []fleet.Engine{{IID: "p0", Role: fleet.Prefill}, {IID: "d0", Role: fleet.Decode}, {IID: "d1", Role: fleet.Decode}}
	if contract {
		f := false
		k := fleet.DefaultContract()
		k.VLLMVersion, k.ImageDigest, k.NIXLVersion, k.NIXLConnectorVersion = "0.11.0", "sha256:"+strings.Repeat("a", 64), "0.6", 2
		k.ModelArchitecture, k.ModelDtype, k.KVHeads, k.HeadSize, k.HiddenLayers = "X", "bf16", 8, 128, 32
		k.AttentionBackend, k.KVCacheDtype, k.CrossLayersBlocks, k.HybridKVCacheManager = "FA", "auto", &f, &f
		k.KVRole, k.TransferMode, k.SpeculativeConfig = "kv_both", "pull", "disabled"
		c.EngineContract = &k
	}
	return &c
}

func TestBreakerVerdicts(t *testing.T) {
	for _, tc := range []struct {
		class Class
		want  Verdict
		after int
	}{
		{Connection, Eject, 3}, {Timeout, VerifyHealth, 3}, {Overload, VerifyHealth, 3},
		{InferenceStatus, VerifyInference, 3}, {KVHandoff, VerifyInference, 3}, {Stream, VerifyInference, 3},
		{Liveness, Eject, 2}, {OutputCut, EjectCovered, 3},
	} {
		m := New(testFleet(false))
		for k := 1; k < tc.after; k++ {
			if v := m.Failure("d0", tc.class); v != None {
				t.Fatalf("%s failure %d: verdict %v before the threshold", tc.class, k, v)
			}
		}
		if v := m.Failure("d0", tc.class); v != tc.want {
			t.Errorf("%s at threshold: %v, want %v", tc.class, v, tc.want)
		}
	}
}

func TestSuccessClearsItsClasses(t *testing.T) {
	m := New(testFleet(false))
	m.Failure("d0", Timeout)
	m.Failure("d0", Timeout)
	m.Failure("d0", Stream)
	m.Success("d0", "health") // clears timeout, not stream
	if s := m.Streaks()["d0"]; s[Timeout] != 0 || s[Stream] != 1 {
		t.Errorf("streaks after health success: %v", s)
	}
	m.Failure("d0", Timeout)
	if v := m.Failure("d0", Timeout); v != None {
		t.Errorf("streak did not restart after success: %v", v)
	}
}

// Only a stream reaching [DONE] clears mid-stream cuts: a passing health
// or inference probe does not, since a short probe passes on an engine
// that cuts long streams.
func TestOutputCutsClearOnlyOnACompletedStream(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		clear bool
	}{{"health", false}, {"inference", false}, {"answered", false}, {"prefill", false}, {"decode", true}} {
		m := New(testFleet(false))
		m.Failure("d0", OutputCut)
		m.Success("d0", tc.kind)
		if got := m.Streaks()["d0"][OutputCut] == 0; got != tc.clear {
			t.Errorf("%s success: output_cut cleared %v, want %v", tc.kind, got, tc.clear)
		}
	}
}

func TestEjectAndRecover(t *testing.T) {
	m := New(testFleet(false))
	if !m.Eject("d0", "connection") || m.Live("d0") || m.Eject("d0", "connection") {
		t.Fatal("eject")
	}
	if got := m.Ejected(); got["d0"] != "connection" {
		t.Errorf("ejected = %v", got)
	}
	m.cfg.ReadmitEvery = 2
	m.engines["d0"].probeDue = 2
	if due := m.DueForProbe(); len(due) != 0 {
		t.Errorf("probe due after one pass: %v", due)
	}
	if due := m.DueForProbe(); len(due) != 1 {
		t.Errorf("probe not due after readmit_every passes: %v", due)
	}
	if !m.Recovered("d0") || !m.Live("d0") {
		t.Error("recover")
	}
}

func TestIdentityChange(t *testing.T) {
	m := New(testFleet(false))
	if changed, _ := m.CheckIdentity("d0", vllm.Identity{Version: "0.11.0", ProcessStart: 100}); changed {
		t.Error("first observation is accepted")
	}
	for _, tc := range []struct {
		seen    vllm.Identity
		changed bool
	}{
		{vllm.Identity{Version: "0.11.0", ProcessStart: 100}, false},
		{vllm.Identity{Version: "0.11.0", ProcessStart: 200}, true},
		{vllm.Identity{Version: "0.12.0", ProcessStart: 100}, true},
		{vllm.Identity{Version: "0.11.0", ProcessStart: 0}, false}, // gauge missing: version only
	} {
		if changed, _ := m.CheckIdentity("d0", tc.seen); changed != tc.changed {
			t.Errorf("%+v: changed = %v", tc.seen, changed)
		}
	}
}

func capture(id vllm.Identity, err error) func() (vllm.Identity, error) {
	return func() (vllm.Identity, error) { return id, err }
}

func TestDrainWithoutContractIsMissingContract(t *testing.T) {
	m := New(testFleet(false))
	rec, err := m.Drain("d0", 1000, 300, false, capture(vllm.Identity{Version: "v", ProcessStart: 1}, nil))
	if err == nil || rec.State != Blocked || m.Live("d0") {
		t.Fatalf("drain: %+v %v; want blocked and held out", rec, err)
	}
	if len(rec.Checks) != 1 || rec.Checks[0].Name != "missing-contract" || !strings.Contains(rec.Checks[0].Detail, "engine_contract") {
		t.Errorf("checks = %+v", rec.Checks)
	}
	_, err = m.Readmit("d0", 1001, func(string, *vllm.Identity, bool) ([]Check, vllm.Identity) {
		t.Fatal("gates ran")
		return nil, vllm.Identity{}
	})
	var c *Conflict
	if !errors.As(err, &c) || m.Live("d0") || recordOf(m, "d0").Checks[0].Name != "missing-contract" {
		t.Errorf("readmit: %v; want a conflict and the engine still held out", err)
	}
}

func TestDrainSettleAndReadmit(t *testing.T) {
	m := New(testFleet(true))
	resident := 2
	rec, err := m.Drain("d0", 1000, 60, false, capture(vllm.Identity{Version: "0.11.0", ProcessStart: 500}, nil))
	if err != nil || rec.State != Draining || m.Live("d0") || *rec.OldProcessStart != 500 {
		t.Fatalf("drain: %+v %v", rec, err)
	}
	if _, err := m.Drain("d0", 1000, 60, false, capture(vllm.Identity{}, nil)); err == nil {
		t.Error("a second drain of a draining engine must conflict")
	}
	m.Settle(1010, func(string) int { return resident })
	if r := recordOf(m, "d0"); r.State != Draining {
		t.Fatalf("with residents: %+v", r)
	}
	resident = 0
	m.Settle(1020, func(string) int { return resident })
	if r := recordOf(m, "d0"); r.State != Drained {
		t.Fatalf("without residents: %+v", r)
	}
	failing := func(_ string, old *vllm.Identity, newer bool) ([]Check, vllm.Identity) {
		return []Check{{Name: "process_identity", OK: false, Detail: "process start 500 is not newer than 500"}}, vllm.Identity{Version: "0.11.0", ProcessStart: 500}
	}
	if rec, err := m.Readmit("d0", 1030, failing); err == nil || rec.State != Blocked || m.Live("d0") {
		t.Fatalf("readmit with a failing gate: %+v %v", rec, err)
	}
	passing := func(_ string, old *vllm.Identity, newer bool) ([]Check, vllm.Identity) {
		if old == nil || old.ProcessStart != 500 || !newer {
			t.Errorf("gates got old %+v newer %v", old, newer)
		}
		return []Check{{Name: "health", OK: true}}, vllm.Identity{Version: "0.11.0", ProcessStart: 900}
	}
	rec, err = m.Readmit("d0", 1040, passing)
	if err != nil || rec.State != Active || !m.Live("d0") || *rec.NewProcessStart != 900 || m.ProcessStarts()["d0"] != 900 {
		t.Fatalf("readmit: %+v %v", rec, err)
	}
}

func TestDrainDeadlineAndLastEngine(t *testing.T) {
	m := New(testFleet(true))
	if _, err := m.Drain("d0", 0, 60, true, capture(vllm.Identity{}, nil)); err == nil {
		t.Error("draining the last live engine must conflict")
	}
	m.Drain("d1", 0, 60, false, capture(vllm.Identity{Version: "v", ProcessStart: 1}, nil))
	m.Settle(61, func(string) int { return 3 })
	if r := recordOf(m, "d1"); r.State != DeadlineExceeded || !strings.Contains(r.Error, "3 resident request(s)") {
		t.Errorf("past the deadline: %+v", r)
	}
}

func TestRestoreBlocksInterruptedValidation(t *testing.T) {
	m := New(testFleet(true))
	start := 5.0
	m.Restore([]Record{{IID: "d0", State: Validating, OldProcessStart: &start, RestartRequired: true}},
		map[string]string{"d1": "connection"}, map[string]float64{"p0": 7})
	if r := recordOf(m, "d0"); r.State != Blocked || !strings.Contains(r.Error, "interrupted") || m.Live("d0") {
		t.Errorf("d0 = %+v", r)
	}
	if m.Live("d1") || m.ProcessStarts()["p0"] != 7 {
		t.Error("restored ejection or process start lost")
	}
	if due := m.DueForProbe(); len(due) != 1 || due[0] != "d1" {
		t.Errorf("a restored ejection is probed at once: %v", due)
	}
}

func recordOf(m *Manager, iid string) Record {
	for _, r := range m.Records() {
		if r.IID == iid {
			return r
		}
	}
	return Record{}
}

func TestQuarantine(t *testing.T) {
	m := New(testFleet(false))
	if !m.Quarantine("d0", 10) || m.Live("d0") || m.Quarantine("d0", 20) {
		t.Fatal("quarantine")
	}
	if got := m.Quarantined(); len(got) != 1 || got[0] != "d0" {
		t.Errorf("quarantined = %v", got)
	}
	if r := m.ReleaseQuarantines(9); len(r) != 0 || m.Live("d0") {
		t.Errorf("released early: %v", r)
	}
	if r := m.ReleaseQuarantines(10); len(r) != 1 || !m.Live("d0") {
		t.Errorf("not released at its deadline: %v", r)
	}
	m.Quarantine("d1", 10)
	m.Eject("d1", "connection")
	if len(m.Quarantined()) != 0 {
		t.Error("an ejection must supersede the quarantine")
	}
}

// NextRelease is the soonest an engine held out may be back: a timed
// hold's end, or an ejected engine's next readmission probe. It is what
// a 503 for a fleet with no engine tells a client to wait.
func TestNextRelease(t *testing.T) {
	m := New(testFleet(false))
	if _, ok := m.NextRelease(0, 2); ok {
		t.Fatal("no hold, yet a release time")
	}
	m.Quarantine("d0", 30)
	m.Quarantine("p0", 12)
	for _, tc := range []struct{ now, want float64 }{{0, 12}, {10, 2}, {15, 0}} {
		if s, ok := m.NextRelease(tc.now, 2); !ok || s != tc.want {
			t.Errorf("NextRelease(%v) = %v, %v; want %v", tc.now, s, ok, tc.want)
		}
	}
	m.ReleaseQuarantines(12)
	if s, ok := m.NextRelease(20, 2); !ok || s != 10 {
		t.Errorf("after p0's release: %v, %v; want d0's 10 s", s, ok)
	}
	m.Eject("p0", "connection") // probed after ReadmitEvery passes
	want := float64(max(m.cfg.ReadmitEvery, 1)) * 2
	if s, ok := m.NextRelease(20, 2); !ok || s != min(want, 10) {
		t.Errorf("with p0 ejected: %v, %v; want min(its next probe %v s, d0's 10 s)", s, ok, want)
	}
}
