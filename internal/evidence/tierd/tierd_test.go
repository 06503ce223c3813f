package tierd

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
	"github.com/narwhal-go/narwhal/internal/ports"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const art = "1220ab00000000000000000000000000000000000000000000000000000000000000"

const request = `{"schema":"narwhal.decision-request","schema_version":1,"model":"m","objective":"max_goodput",
"slo":{"ttft_s":1,"tpot_s":0.05,"attainment":0.8},"workload":{"max_input_tokens":100,"max_output_tokens":10,"max_rate_per_s":10,"min_samples":20},
"artifact_policy":{"artifact":""}}`

type fixture struct {
	st       *store.Store
	req, sut string
	at       time.Time
}

func (f *fixture) put(t *testing.T, r evidence.Record) string {
	t.Helper()
	f.at = f.at.Add(time.Second)
	d, err := f.st.PutRecord(evidence.Stamp(r, ports.NewFake(f.at)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) accept(t *testing.T, kind decision.RevisionKind, raw []byte) string {
	t.Helper()
	rev, err := f.st.PutDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := decision.ParsePrincipal("ai_agent:planner", "cli")
	human, _ := decision.ParsePrincipal("human:op", "cli")
	f.put(t, decision.Proposal(kind, rev, agent, ports.NewFake(f.at)))
	rs, _ := f.st.Records()
	a, err := decision.Accept(rs, rev, human, ports.NewFake(f.at))
	if err != nil {
		t.Fatal(err)
	}
	// An acceptance counts only signed by a key registered for human:op.
	key, err := sign.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddPrincipalKey(human.String(), key.Public); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Sign(f.put(t, a), key); err != nil {
		t.Fatal(err)
	}
	return rev
}

func rec(kind evidence.Kind, scope evidence.ClaimScope, verdict string, subject map[string]string, display map[string]any) evidence.Record {
	status := evidence.Measured
	level := evidence.MaintainerLabMeasured
	if kind == evidence.KindPrediction {
		status, level = evidence.Predicted, evidence.CalculatedOnly
	}
	v := 8.0 * (1 << 30)
	return evidence.Record{Kind: kind, ClaimScope: scope, EpistemicStatus: status, Level: level, Subject: subject,
		Claim: evidence.Claim{Quantity: string(kind), Verdict: &verdict, Value: &v}, Engine: evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: display}
}

// recommended builds a store in which p0 is recommended_endpoint.
func recommended(t *testing.T) *fixture {
	f := &fixture{st: store.Open(t.TempDir()), at: t0}
	_, reqB, err := decision.ParseRequest([]byte(request))
	if err != nil {
		t.Fatal(err)
	}
	f.req = f.accept(t, decision.KindRequest, reqB)
	_, suiteB, _ := decision.ParseSuite([]byte(`{"schema":"narwhal.task-suite","schema_version":1,"name":"s","model":"m","kind":"cases","quality_floor":1,
"cases":[{"id":"a","prompt":"p","max_tokens":1,"scorer":"exact","expected":"x","schema":null}]}`))
	f.sut = f.accept(t, decision.KindSuite, suiteB)
	hw := map[string]string{evidence.SubjectArtifact: art, evidence.SubjectHardwareClass: "hw"}
	f.put(t, rec(evidence.KindPrediction, evidence.ScopeMemory, evidence.VerdictFits, hw, map[string]any{"stated_margin_bytes": float64(1 << 30)}))
	f.put(t, rec(evidence.KindBoot, evidence.ScopeBoot, evidence.VerdictHealthy, map[string]string{evidence.SubjectArtifact: art,
		evidence.SubjectHardwareClass: "hw", evidence.SubjectEndpoint: "fp"}, map[string]any{"engine_iid": "p0"}))
	f.serving(t, "w1", evidence.VerdictMeetsSLO)
	f.put(t, rec(evidence.KindTask, evidence.ScopeTaskOutcome, evidence.VerdictPass, map[string]string{evidence.SubjectEndpoint: "fp",
		evidence.SubjectApplication: f.req, evidence.SubjectTaskSuite: f.sut}, map[string]any{}))
	return f
}

func (f *fixture) serving(t *testing.T, window, verdict string) {
	f.put(t, rec(evidence.KindWorkload, evidence.ScopeServingPerformance, verdict, map[string]string{evidence.SubjectEndpoint: "fp",
		evidence.SubjectApplication: f.req, evidence.SubjectWindow: window}, map[string]any{}))
}

func (f *fixture) derive(t *testing.T, shuffle bool) Report {
	t.Helper()
	rs, err := f.st.Records()
	if err != nil {
		t.Fatal(err)
	}
	if shuffle {
		slices.Reverse(rs)
	}
	rep, err := Derive(Input{Store: f.st, Records: rs, Engines: []string{"p0"}, Model: "m", AsOf: f.at.Add(time.Hour), Releases: vllmrel.Shipped()})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRecommendedFromStore(t *testing.T) {
	rep := recommended(t).derive(t, false)
	if ep := rep.Endpoints[0]; ep.Tier != evidence.RecommendedEndpoint {
		t.Fatalf("tier %s, missing %v, notes %v", ep.Tier, ep.MissingText, ep.Notes)
	}
}

// Same records in any order, same as-of: byte-identical decisions.
func TestDeriveByteIdentical(t *testing.T) {
	f := recommended(t)
	a, _ := json.Marshal(f.derive(t, false))
	b, _ := json.Marshal(f.derive(t, true))
	if string(a) != string(b) {
		t.Fatalf("record order changed the report:\n%s\n%s", a, b)
	}
}

// An older passing window never hides a newer failing one.
func TestLatestServingWindowCounts(t *testing.T) {
	f := recommended(t)
	f.serving(t, "w2", "misses_slo")
	ep := f.derive(t, false).Endpoints[0]
	if ep.Tier == evidence.RecommendedEndpoint || !slices.Contains(ep.Missing, evidence.NeedServing) {
		t.Fatalf("tier %s missing %v: the newer failing window was ignored", ep.Tier, ep.Missing)
	}
}

// Task records of a suite nobody accepted count for nothing.
func TestUnacceptedSuiteIgnored(t *testing.T) {
	f := recommended(t)
	rs, _ := f.st.Records()
	for _, s := range rs {
		if s.Record.Kind == evidence.KindTask {
			r := s.Record
			r.Subject = map[string]string{evidence.SubjectEndpoint: "fp", evidence.SubjectApplication: f.req, evidence.SubjectTaskSuite: art}
			f.put(t, r)
		}
	}
	f2 := &fixture{st: f.st, req: f.req, at: f.at}
	ep := f2.derive(t, false).Endpoints[0]
	found := false
	for _, n := range ep.Notes {
		found = found || len(n) > 0 && slices.Contains([]string{"ignored"}, n[len(n)-7:])
	}
	if !found {
		t.Fatalf("no note about the unaccepted suite: %v", ep.Notes)
	}
}
