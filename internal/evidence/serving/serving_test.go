package serving

import (
	"math"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

const (
	bootA = "1220aaaa000000000000000000000000000000000000000000000000000000000000"
	bootB = "1220bbbb000000000000000000000000000000000000000000000000000000000000"
	reqD  = "1220cccc000000000000000000000000000000000000000000000000000000000000"
)

func request() decision.Request {
	return decision.Request{Model: "m", Objective: "max_goodput", SLO: decision.SLO{TTFTSeconds: 1, TPOTSeconds: 0.05, Attainment: 0.8},
		Workload: decision.Workload{MaxInputTokens: 1000, MaxOutputTokens: 100, MaxRatePerS: 100, MinSamples: 20}}
}

func row(at float64, ttft float64, iid string) Row {
	return Row{Run: "r1", Arrived: at, InputLen: 10, WantedLen: 8, OutLen: 8, TTFT: ttft, TPOT: math.NaN(),
		Terminal: journal.TerminalCompleted, Prefill: iid}
}

// A window spanning an engine restart splits by generation, each bound to
// the boot record of its own process.
func TestWindowSplitsByGeneration(t *testing.T) {
	w := NewWindow([]string{"p0"}, 0)
	for i := range 25 {
		w.Request(row(float64(i), 0.1, "p0"))
	}
	w.Exclusion("p0", 100, 200)
	for i := range 5 {
		w.Request(row(float64(30+i), 5, "p0"))
	}
	in := Input{Windows: []*Window{w}, Request: request(), RequestDigest: reqD,
		Bindings: []Binding{{IID: "p0", ProcessStart: 100, Endpoint: "fpA", EngineVersion: "0.21.0", BootRecord: bootA, ObservedAt: "2026-01-01T00:00:01Z"},
			{IID: "p0", ProcessStart: 200, Endpoint: "fpB", EngineVersion: "0.22.0", BootRecord: bootB, ObservedAt: "2026-01-01T00:00:02Z"}}}
	res, err := Records(in, ports.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 2 {
		t.Fatalf("records %d (notes %v), want one per generation", len(res.Records), res.Notes)
	}
	byEP := map[string]evidence.Record{}
	for _, r := range res.Records {
		byEP[r.Subject[evidence.SubjectEndpoint]] = r
	}
	if v := *byEP["fpA"].Claim.Verdict; v != evidence.VerdictMeetsSLO {
		t.Fatalf("old generation verdict %s, want meets_slo", v)
	}
	if v := *byEP["fpB"].Claim.Verdict; v != VerdictInsufficient {
		t.Fatalf("new generation verdict %s, want insufficient_samples (5 offers)", v)
	}
	if byEP["fpB"].Engine.Version != "0.22.0" {
		t.Fatal("the new generation's record is not at its own engine version")
	}
}

func TestUnboundGenerationMakesNoRecord(t *testing.T) {
	w := NewWindow([]string{"p0"}, 0)
	w.Exclusion("p0", 100, 300)
	w.Request(row(1, 0.1, "p0"))
	in := Input{Windows: []*Window{w}, Request: request(), RequestDigest: reqD,
		Bindings: []Binding{{IID: "p0", ProcessStart: 100, Endpoint: "fpA", BootRecord: bootA}}}
	res, err := Records(in, ports.NewFake(time.Unix(0, 0)))
	if err != nil || len(res.Records) != 0 || len(res.Notes) != 1 {
		t.Fatalf("records %d notes %v err %v: want no record and one note", len(res.Records), res.Notes, err)
	}
}

func TestVerdict(t *testing.T) {
	base := Stats{Offered: 30, Met: 30, AttainmentLower: wilsonLower(30, 30), MaxInputLen: 10, MaxOutLen: 8, RatePerS: 1}
	cases := []struct {
		name string
		mod  func(*Stats)
		want string
	}{
		{"all met", func(*Stats) {}, evidence.VerdictMeetsSLO},
		{"too few offers", func(s *Stats) { s.Offered = 19 }, VerdictInsufficient},
		{"input longer than the envelope", func(s *Stats) { s.MaxInputLen = 2000 }, VerdictOutsideWorkload},
		{"rate above the envelope", func(s *Stats) { s.RatePerS = 500 }, VerdictOutsideWorkload},
		{"lower bound below target", func(s *Stats) { s.AttainmentLower = wilsonLower(20, 30) }, VerdictMissesSLO},
	}
	for _, c := range cases {
		s := base
		c.mod(&s)
		if got := Verdict(s, request()); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestWilsonLower(t *testing.T) {
	if l := wilsonLower(24, 24); l < 0.86 || l > 0.87 {
		t.Fatalf("wilson lower 24/24 = %v, want ≈0.862", l)
	}
}
