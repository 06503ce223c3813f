package queue

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

var now = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

func dg(c byte) string { return "1220" + strings.Repeat(string([]byte{c, c}), 32) }

func sig(origin, at, attr string) Signal {
	return Signal{Origin: origin, Label: origin, Value: 1, ObservedAt: at, Attribution: attr}
}

func downloads(n float64, at string) Signal {
	return Signal{Origin: "hf_downloads_30d", Label: "whatever the feed said", Value: n, ObservedAt: at, Attribution: "https://huggingface.co/x"}
}

func measured(artifact, verdict string, level evidence.Level, engine string) evidence.Record {
	v := verdict
	return evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: level,
		Subject: map[string]string{evidence.SubjectArtifact: artifact, evidence.SubjectHardwareClass: "h100"},
		Claim:   evidence.Claim{Quantity: "boot", Verdict: &v}, Engine: evidence.Engine{Name: "vllm", Version: engine, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "t", Inputs: []string{}}, Display: map[string]any{},
	}, ports.NewFake(now))
}

func fresh() evidence.FreshnessInput {
	r := func(s string) evidence.Version { v, _ := evidence.ParseVersion(s); return v }
	return evidence.FreshnessInput{Now: now, Releases: []evidence.Version{r("0.10.0"), r("0.11.0")}, Advisories: []evidence.Advisory{}}
}

func build(t *testing.T, cs []Candidate, ev Evidence) ([]Item, []Item) {
	t.Helper()
	q, h, err := Build(cs, ev)
	if err != nil {
		t.Fatal(err)
	}
	return q, h
}

func keys(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.DedupKey)
	}
	return out
}

func TestAcceptedAndFailedEnterDirectly(t *testing.T) {
	cs := []Candidate{
		{Source: AcceptedRequest, Name: "req", Artifact: dg('a'), ClaimScope: evidence.ScopeBoot, Reference: dg('1')},
		{Source: LocalFailedPlan, Name: "failed", Solution: dg('2'), ClaimScope: evidence.ScopeBoot, Reference: dg('3'), Failures: []string{dg('f')}},
	}
	q, h := build(t, cs, Evidence{Freshness: fresh()})
	if len(q) != 2 || len(h) != 0 {
		t.Fatalf("queued %v held %v", keys(q), keys(h))
	}
	if q[0].DedupKey != "solution:"+dg('2') || q[0].FailureValue != 1 || !strings.Contains(strings.Join(q[0].Why, "\n"), "entered directly as local_failed_plan") {
		t.Fatalf("first %+v", q[0])
	}
	if _, _, err := Build([]Candidate{{Source: AcceptedRequest, Artifact: dg('a')}}, Evidence{}); err == nil {
		t.Fatal("a direct entry without its record was accepted")
	}
}

func TestDownloadsAloneIneligible(t *testing.T) {
	cs := []Candidate{
		{Source: FromSignals, Name: "popular", Artifact: dg('a'), Signals: []Signal{downloads(1e6, "2026-09-01"), downloads(2e6, "2026-09-05")}},
		{Source: FromSignals, Name: "released", Artifact: dg('b'), Signals: []Signal{sig("vllm_release", "2026-09-01", "https://github.com/vllm-project/vllm/releases")}},
	}
	q, h := build(t, cs, Evidence{Freshness: fresh()})
	if len(q) != 1 || q[0].DedupKey != dg('b') || len(h) != 1 || h[0].DedupKey != dg('a') {
		t.Fatalf("queued %v held %v", keys(q), keys(h))
	}
	// Two download readings collapse into one labelled signal, the newest.
	if s := h[0].Signals; len(s) != 1 || s[0].Value != 2e6 || !strings.Contains(s[0].Label, "not deduplicated") {
		t.Fatalf("signals %+v", s)
	}
}

func TestDownloadsNeverBreakTie(t *testing.T) {
	rel := sig("vllm_release", "2026-09-01", "https://example.invalid/r")
	cs := []Candidate{
		{Source: FromSignals, Name: "z-popular", Artifact: dg('a'), Signals: []Signal{rel, downloads(9e9, "2026-09-01")}},
		{Source: FromSignals, Name: "a-quiet", Artifact: dg('b'), Signals: []Signal{rel}},
	}
	q, _ := build(t, cs, Evidence{Freshness: fresh()})
	if q[0].Breadth != q[1].Breadth || q[0].DedupKey != dg('a') || !strings.HasPrefix(q[0].AheadBy, "fingerprint order") {
		t.Fatalf("downloads decided the order: %+v", q)
	}
}

func TestDedupByArtifactIdentity(t *testing.T) {
	cs := []Candidate{
		{Source: FromSignals, Name: "org-a/model", Artifact: dg('a'), Signals: []Signal{sig("recipes", "2026-09-01", "https://example.invalid/recipe")}},
		{Source: FromSignals, Name: "mirror-b/model", Artifact: dg('a'), Signals: []Signal{sig("recipes", "2026-09-01", "https://example.invalid/recipe"), sig("inferencex", "2026-09-02", "https://example.invalid/ix")}},
		{Source: FromSignals, Name: "org-a/model", Artifact: dg('c'), Signals: []Signal{sig("recipes", "2026-09-01", "https://example.invalid/other")}},
	}
	q, _ := build(t, cs, Evidence{Freshness: fresh()})
	if len(q) != 2 {
		t.Fatalf("queued %v: two repositories with the same bytes must make one item, one name with other bytes another", keys(q))
	}
	if q[0].DedupKey != dg('a') || !reflect.DeepEqual(q[0].Names, []string{"mirror-b/model", "org-a/model"}) || len(q[0].Signals) != 2 || q[0].Breadth != 2 {
		t.Fatalf("merged %+v", q[0])
	}
}

func TestGapOrder(t *testing.T) {
	lvl := evidence.MaintainerLabMeasured
	recs := []evidence.Record{
		measured(dg('b'), "healthy", lvl, "0.11.0"), measured(dg('b'), "failed", evidence.CommunityReported, "0.11.0"), // contested
		measured(dg('c'), "healthy", lvl, "0.10.0"), // stale: 0.11.0 is out
		measured(dg('d'), "healthy", lvl, "0.11.0"), // covered
	}
	var cs []Candidate
	for _, c := range []byte{'d', 'c', 'b', 'a'} {
		cs = append(cs, Candidate{Source: AcceptedRequest, Artifact: dg(c), ClaimScope: evidence.ScopeBoot, Reference: dg('1')})
	}
	q, _ := build(t, cs, Evidence{Records: recs, Freshness: fresh()})
	var gaps []Gap
	for _, it := range q {
		gaps = append(gaps, it.Gap)
	}
	if want := []Gap{GapMissing, GapContested, GapStale, GapCovered}; !reflect.DeepEqual(gaps, want) {
		t.Fatalf("gaps %v, want %v", gaps, want)
	}
	if q[0].AheadBy != "evidence gap (missing before contested)" || q[3].AheadBy != "" {
		t.Fatalf("explanations %q / %q", q[0].AheadBy, q[3].AheadBy)
	}
}

func TestFailuresThenUncertaintyThenBreadth(t *testing.T) {
	r := func(n int) []Signal {
		var s []Signal
		for i := range n {
			s = append(s, sig(string(rune('a'+i))+"_origin", "2026-09-01", "https://example.invalid"))
		}
		return s
	}
	cs := []Candidate{
		{Source: FromSignals, Artifact: dg('1'), Signals: r(3)},
		{Source: FromSignals, Artifact: dg('2'), Signals: r(1), Uncertainty: 0.3},
		{Source: LocalFailedPlan, Artifact: dg('3'), Reference: dg('9'), Failures: []string{dg('e'), dg('f')}},
		{Source: LocalFailedPlan, Artifact: dg('4'), Reference: dg('9'), Failures: []string{dg('e')}},
	}
	q, _ := build(t, cs, Evidence{Freshness: fresh(), ResolvedFailures: map[string]bool{dg('e'): true}})
	if got := keys(q); !reflect.DeepEqual(got, []string{dg('3'), dg('2'), dg('1'), dg('4')}) {
		t.Fatalf("order %v", got)
	}
	want := []string{"unresolved failures (1 over 0)", "uncertainty (0.3 over 0)", "signal breadth (3 origins over 0; popularity counters not counted)"}
	for i, w := range want {
		if q[i].AheadBy != w {
			t.Errorf("#%d ahead by %q, want %q", i+1, q[i].AheadBy, w)
		}
	}
}

func TestRankDeterministic(t *testing.T) {
	cs := []Candidate{
		{Source: FromSignals, Artifact: dg('1'), Signals: []Signal{sig("recipes", "2026-09-01", "u1"), downloads(5, "2026-09-02")}},
		{Source: FromSignals, Artifact: dg('2'), Signals: []Signal{sig("inferencex", "2026-09-01", "u2")}},
		{Source: AcceptedRequest, Artifact: dg('3'), Reference: dg('7')},
	}
	first, _ := build(t, cs, Evidence{Freshness: fresh()})
	a, _ := json.Marshal(first)
	for range 5 {
		rev := append([]Candidate(nil), cs...)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		cs = rev
		again, _ := build(t, cs, Evidence{Freshness: fresh()})
		if b, _ := json.Marshal(again); string(a) != string(b) {
			t.Fatalf("input order changed the queue:\n%s\n%s", a, b)
		}
	}
}

// TestNoGPUClassRule (INV-20): which hardware class a record names never
// changes the order; only the evidence gap does.
func TestNoGPUClassRule(t *testing.T) {
	cs := []Candidate{
		{Source: AcceptedRequest, Artifact: dg('a'), ClaimScope: evidence.ScopeBoot, Reference: dg('1')},
		{Source: AcceptedRequest, Artifact: dg('b'), ClaimScope: evidence.ScopeBoot, Reference: dg('1')},
	}
	order := func(class string) []string {
		r := measured(dg('a'), "healthy", evidence.MaintainerLabMeasured, "0.11.0")
		r.Subject[evidence.SubjectHardwareClass] = class
		q, _ := build(t, cs, Evidence{Records: []evidence.Record{r}, Freshness: fresh()})
		return keys(q)
	}
	if a, b := order("h100-sxm-80gb/81070mib/cc9.0/x8"), order("t4/15360mib/cc7.5/x1"); !reflect.DeepEqual(a, b) {
		t.Fatalf("hardware class changed the order: %v vs %v", a, b)
	}
}

func TestCandidateValidation(t *testing.T) {
	bad := []Candidate{
		{Source: "rumour", Artifact: dg('a')},
		{Source: FromSignals, Name: "by name only"},
		{Source: FromSignals, Artifact: "sha256:abc"},
		{Source: FromSignals, Artifact: dg('a'), Signals: []Signal{{Origin: "recipes", Value: 1}}},
		{Source: FromSignals, Artifact: dg('a'), Uncertainty: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}
