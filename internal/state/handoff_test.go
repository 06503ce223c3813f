package state

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

func ptr(f float64) *float64 { return &f }

// fullDoc is a valid document with every section populated.
func fullDoc() *Handoff {
	return &Handoff{
		Schema: HandoffSchema, SchemaVersion: 1, At: 1790000000.5, Run: "1790000000-3fa2c91b",
		Model: "m", Epoch: 3, Holder: "router-a:0123456789abcdef0123456789abcdef",
		Engines:          []string{"e0", "e1", "e2"},
		Roles:            map[string]fleet.Role{"e0": fleet.Prefill, "e1": fleet.Decode, "e2": fleet.Decode},
		Ejected:          []string{"e1"},
		InferenceSources: map[string][]string{"e2": {"e0", ""}},
		Counters:         Counters{Offered: 9, Served: 7, SLOMet: 6, Failed: 1, Refused: 1},
		OutcomeReasons: OutcomeReasons{
			Failed: map[string]int64{"engine_error": 1}, Refused: map[string]int64{"slo": 1},
			Rejected: map[string]int64{}, Expired: map[string]int64{},
		},
		Lifecycle: &Lifecycle{
			WaveID: "w1",
			Records: []DrainRecord{{
				IID: "e1", State: StateDrained, RequestedAt: 1789999990, DeadlineAt: ptr(1790000290),
				RestartRequired: true, WaveID: "w1", OldProcessStart: ptr(1789990000),
				Checks: []Check{{Name: "health", OK: true, Detail: ""}},
			}},
			Events:              []map[string]any{{"action": "drain_started", "iid": "e1", "at": json.Number("1789999990.25")}},
			EngineRestartPolicy: PolicyIndividual,
			ProcessStarts:       map[string]float64{"e0": 1789990000, "e1": 1789990000, "e2": 1789990001},
		},
		DemandRisk: &DemandRisk{Kind: "first_token_timeout", AgeS: 2.5, Events: map[string]int{"first_token_timeout": 2}},
	}
}

// emptyDoc is the smallest valid document: no lease, nothing recorded.
func emptyDoc() *Handoff {
	return &Handoff{Schema: HandoffSchema, SchemaVersion: 1, At: 1790000000,
		Engines: []string{"e0", "e1"}, Roles: map[string]fleet.Role{"e0": fleet.Prefill, "e1": fleet.Decode},
		Lifecycle: &Lifecycle{EngineRestartPolicy: PolicyIndividual}}
}

func TestRoundTrip(t *testing.T) {
	for name, h := range map[string]*Handoff{"full": fullDoc(), "empty": emptyDoc()} {
		t.Run(name, func(t *testing.T) {
			b, err := Encode(h)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(h.normalized(), got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// The empty document has exactly the shape of runtime.md §3.7: every key,
// empty containers as {} and [], demand_risk null.
func TestEncodeShapeMatchesReference(t *testing.T) {
	const ref = `{"schema": "narwhal.handoff", "schema_version": 1, "at": 1790000000.0,
	  "run": "", "model": "", "epoch": 0, "holder": "", "engines": ["e0", "e1"],
	  "roles": {"e0": "prefill", "e1": "decode"}, "ejected": [], "inference_sources": {},
	  "counters": {"offered": 0, "unsized_offered": 0, "served": 0, "slo_met": 0, "expired": 0,
	               "invalid_requests": 0, "failed": 0, "refused": 0, "rejected": 0,
	               "cancelled": 0, "unserved": 0},
	  "outcome_reasons": {"failed": {}, "refused": {}, "rejected": {}, "expired": {}},
	  "lifecycle": {"wave_id": "", "records": [], "events": [],
	                "engine_restart_policy": "individual", "process_starts": {}},
	  "demand_risk": null}`
	b, err := Encode(emptyDoc())
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ref), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encoded shape (-reference +got):\n%s", diff)
	}
	if _, err := Decode([]byte(ref)); err != nil {
		t.Errorf("the reference example must decode: %v", err)
	}
}

func TestEncodeDoesNotMutate(t *testing.T) {
	h := emptyDoc()
	if _, err := Encode(h); err != nil {
		t.Fatal(err)
	}
	if h.Ejected != nil || h.Lifecycle.ProcessStarts != nil {
		t.Error("Encode filled the caller's nil containers; it must work on a copy")
	}
}

func TestValidate(t *testing.T) {
	cfg := []string{"e0", "e1", "e2"}
	cases := []struct {
		name   string
		policy string
		mut    func(h *Handoff)
		want   string // substring of the error; "" for valid
	}{
		{"valid", "", func(h *Handoff) {}, ""},
		{"valid with matching policy", PolicyIndividual, func(h *Handoff) {}, ""},
		{"schema", "", func(h *Handoff) { h.Schema = "narwhal.state" }, "handoff field schema: is \"narwhal.state\""},
		{"newer version", "", func(h *Handoff) { h.SchemaVersion = 2 }, "handoff schema version 2 is newer than this build (writes and reads 1)"},
		{"older version", "", func(h *Handoff) { h.SchemaVersion = 0 }, "handoff schema version 0 is not readable by this build"},
		{"at NaN", "", func(h *Handoff) { h.At = math.NaN() }, "field at:"},
		{"at negative", "", func(h *Handoff) { h.At = -1 }, "field at:"},
		{"epoch negative", "", func(h *Handoff) { h.Epoch = -1 }, "field epoch: must be an integer ≥ 0"},
		{"holder without epoch", "", func(h *Handoff) { h.Epoch = 0 }, "field holder:"},
		{"epoch without holder", "", func(h *Handoff) { h.Holder = "" }, "field holder:"},
		{"engines unsorted", "", func(h *Handoff) { h.Engines = []string{"e1", "e0"} }, "field engines: must be sorted"},
		{"engines duplicate", "", func(h *Handoff) { h.Engines = []string{"e0", "e0"} }, "field engines: must be sorted and unique"},
		{"engines empty name", "", func(h *Handoff) { h.Engines = []string{""} }, "field engines[0]: is empty"},
		{"role unknown engine", "", func(h *Handoff) { h.Roles["e9"] = "decode" }, "field roles.e9: names engine \"e9\""},
		{"role unknown value", "", func(h *Handoff) { h.Roles["e0"] = "both" }, "field roles.e0: is \"both\", not prefill or decode"},
		{"ejected unknown", "", func(h *Handoff) { h.Ejected = []string{"e9"} }, "field ejected[0]: names engine \"e9\""},
		{"ejected repeated", "", func(h *Handoff) { h.Ejected = []string{"e1", "e1"} }, "field ejected[1]: repeats"},
		{"inference key unknown", "", func(h *Handoff) { h.InferenceSources["e9"] = []string{"e0"} }, "field inference_sources.e9: names engine"},
		{"inference list empty", "", func(h *Handoff) { h.InferenceSources["e2"] = []string{} }, "field inference_sources.e2: is empty"},
		{"inference producer unknown", "", func(h *Handoff) { h.InferenceSources["e2"] = []string{"e9"} }, "field inference_sources.e2[0]: names engine \"e9\""},
		{"counter negative", "", func(h *Handoff) { h.Counters.Served = -1 }, "field counters.served: is -1"},
		{"reason negative", "", func(h *Handoff) { h.OutcomeReasons.Failed["x"] = -2 }, "field outcome_reasons.failed.x: is -2"},
		{"reason empty name", "", func(h *Handoff) { h.OutcomeReasons.Expired[""] = 1 }, "field outcome_reasons.expired: has an empty reason"},
		{"lifecycle missing", "", func(h *Handoff) { h.Lifecycle = nil }, "field lifecycle: is missing"},
		{"policy invalid", "", func(h *Handoff) { h.Lifecycle.EngineRestartPolicy = "sometimes" }, "field lifecycle.engine_restart_policy: is \"sometimes\""},
		{"policy differs from fleet", PolicyWholeWave, func(h *Handoff) {}, "is \"individual\" but the fleet sets \"whole_wave\""},
		{"events over 200", "", func(h *Handoff) { h.Lifecycle.Events = make([]map[string]any, 201) }, "field lifecycle.events: holds 201 events"},
		{"process start unknown engine", "", func(h *Handoff) { h.Lifecycle.ProcessStarts["e9"] = 1 }, "field lifecycle.process_starts.e9: names engine"},
		{"process start zero", "", func(h *Handoff) { h.Lifecycle.ProcessStarts["e0"] = 0 }, "field lifecycle.process_starts.e0: must be a positive finite"},
		{"process start infinite", "", func(h *Handoff) { h.Lifecycle.ProcessStarts["e0"] = math.Inf(1) }, "field lifecycle.process_starts.e0: must be a positive finite"},
		{"record unknown engine", "", func(h *Handoff) { h.Lifecycle.Records[0].IID = "e9" }, "field lifecycle.records[0].iid: names engine"},
		{"record bad state", "", func(h *Handoff) { h.Lifecycle.Records[0].State = "paused" }, "field lifecycle.records[0].state: is \"paused\""},
		{"record bad time", "", func(h *Handoff) { h.Lifecycle.Records[0].DeadlineAt = ptr(math.NaN()) }, "field lifecycle.records[0].deadline_at:"},
		{"record check unnamed", "", func(h *Handoff) { h.Lifecycle.Records[0].Checks[0].Name = "" }, "field lifecycle.records[0].checks[0].name: is empty"},
		{"demand risk kind", "", func(h *Handoff) { h.DemandRisk.Kind = "" }, "field demand_risk.kind: is empty"},
		{"demand risk age", "", func(h *Handoff) { h.DemandRisk.AgeS = -1 }, "field demand_risk.age_s:"},
		{"demand risk events", "", func(h *Handoff) { h.DemandRisk.Events["x"] = -1 }, "field demand_risk.events.x: is -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fullDoc()
			tc.mut(h)
			err := h.Validate(cfg, tc.policy)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// Validate checks references against the configured engines, not the
// document's own list.
func TestValidateAgainstConfiguredEngines(t *testing.T) {
	err := fullDoc().Validate([]string{"e0", "e1"}, "")
	if err == nil || !strings.Contains(err.Error(), `names engine "e2", which the fleet does not configure`) {
		t.Fatalf("error = %v, want e2 reported as not configured", err)
	}
}
