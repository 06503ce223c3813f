package routerdoc

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// update rewrites the golden files: go test ./internal/routerdoc -run Golden -update.
// Only for a deliberate change of a served document, which then also
// needs its schema_version considered and the docs updated.
var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// encode is the router's writeJSON encoding.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		var pretty bytes.Buffer
		json.Indent(&pretty, got, "", "  ")
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSpace(got); !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("the served %s changed: a refactor of the core or of lifecycle reached the wire.\n got %s\nwant %s", name, got, compact.Bytes())
	}
}

// stateInput fills every section of the state document.
func stateInput() StateInput {
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.05}
	cfg.Engines = []fleet.Engine{{IID: "d0", Role: fleet.Decode, Pin: true}, {IID: "p0", Role: fleet.Prefill}}
	drained := 1.25
	flip := sched.Flip{At: 3, IID: "p0", To: fleet.Prefill, By: "reactive", PrefillInflight: 1, DrainedS: &drained}
	var counts Counts
	counts.Count(journal.TerminalCompleted, "")
	counts.Count(journal.TerminalFailed, string(fault.EngineTimeout))
	counts.AttemptFailed("prefill", string(fault.EngineTimeout))
	scored := 2.5
	reason := "stage prefill failing"
	return StateInput{Fleet: &cfg, JournalRun: "1790000000-0000000a", Inflight: 2, Limit: 64, Retained: 3, BodyReads: 1, MaxModelLen: 4096,
		Core: &sched.Snapshot{At: 10, Unserved: 1, Tracked: 2, Load: sched.Loads{Prefill: 0.5, Decode: 0.25},
			Queue: sched.QueueView{Depth: 1, KVTokens: 100, Limit: 1024, KVLimit: 9000, DrainS: 0.5},
			Engines: []sched.EngineView{
				{IID: "d0", Role: fleet.Decode, Pin: true, Live: true, ResidentDecode: 2, DecodeTokens: 300, Correction: 1.1, Load: sched.EngineLoad{Decode: 0.25}},
				{IID: "p0", Role: fleet.Prefill, Live: true, ResidentPrefill: 1, PrefillTokens: 800, PrefillQueueS: 0.2, Correction: 1, Load: sched.EngineLoad{Prefill: 0.5}}}},
		Control: sched.ControlState{Policy: "reactive", Decisions: map[string]int{"applied": 1}, Flips: map[string]int{"prefill": 1},
			LastDecision: &sched.Decision{At: 3, Prefill: 1, Decode: 1, By: "reactive", Reason: "ttft", Result: "applied", Applied: true, Flip: &flip,
				Details: map[string]float64{"ratio": 1.5}},
			FlipsRefused: []sched.Refused{{At: 4, To: fleet.Decode, Why: "dwell"}}, History: []sched.Flip{flip}},
		Counts:      counts,
		Ejected:     map[string]string{"x": "connection"},
		Records:     []lifecycle.Record{{IID: "d0", State: lifecycle.Active}, {IID: "p0", State: lifecycle.Draining}},
		Probation:   []string{"d0"},
		Health:      map[string]HealthState{"d0": {Baseline: 0.02, Scored: 3, LastScoredSAgo: &scored}},
		Quarantined: []string{},
		Held:        []lifecycle.Hold{{IID: "p0", Cause: "contract", Detail: "attestation refused", Since: 7}},
		Monitoring: MonitoringState{CoreFailures: 1, Reason: &reason,
			Stages: map[string]MonitoringStage{"prefill": {Consecutive: 1, Failures: 2, LastAt: 9, LastClass: "io"}}},
		Evidence: EvidenceState{Enabled: true, Endpoints: map[string]EndpointTier{"p0": {Endpoint: "fp", Tier: "candidate", Missing: []string{"boot"}}},
			Journal: &EvidenceJournal{TornRows: 1, FirstTorn: "journal.jsonl:3", PassBytes: 10, PassRows: 1, WindowRows: 5}},
		Profiles:  ProfilesState{Path: "profiles.json", Digest: "sha256:00", LoadedAt: "2026-12-03T00:00:00Z", Reloads: 1},
		Residency: map[string]residency.EngineState{"d0": {Known: true, Epoch: "e", Sequence: 4, BlockSize: 16, ResidentBlocks: map[string]int{"h": 2}}},
	}
}

// The narwhal.state v1 document is byte-stable: every section built from
// a fixed input encodes to the golden bytes, so a change to a core or
// lifecycle type that reaches the wire fails here, not in a client.
func TestStateDocumentGolden(t *testing.T) {
	golden(t, "state.golden.json", encode(t, State(stateInput())))
}

// The narwhal.lifecycle v1 document likewise.
func TestLifecycleDocumentGolden(t *testing.T) {
	old, req := 100.5, 3.0
	doc := LifecycleDoc{Schema: LifecycleSchema, SchemaVersion: LifecycleSchemaVersion, EngineRestartPolicy: "manual",
		Engines: map[string]LifecycleEngine{"p0": {AcceptsNew: false, Draining: true, Checks: []lifecycle.Check{{Name: "health", OK: true, Detail: "GET /health 200"}},
			Held: []lifecycle.Hold{{IID: "p0", Cause: "contract", Detail: "refused", Since: 7}}, OldProcessStart: &old, RequestedAt: &req,
			Resident: PhasePair[int]{Prefill: 1}, State: lifecycle.Draining, WaveID: "w1"}},
		Events:        []LifecycleEvent{{At: 2, Action: "drain_started", Fields: map[string]any{"iid": "p0", "wave_id": "w1"}}},
		ProcessStarts: map[string]float64{"p0": 100.5},
		Router:        LifecycleRouter{ControlsFleet: true, Ready: true},
		Wave:          LifecycleWave{Active: true, ID: "w1"}}
	golden(t, "lifecycle.golden.json", encode(t, doc))
}
