package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func smallSweep(seed uint64, workers int) Sweep {
	return Sweep{Fleet: DemoFleet(3), Arms: AllArms(3), Rates: []float64{2, 5}, Seed: seed,
		Segments: MovingSegments(40), Target: 0.9, Workers: workers}
}

func resultsJSON(t *testing.T, s Sweep) []byte {
	t.Helper()
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	b, err := res.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Same seed, byte-identical results, however many workers ran them; a
// different seed gives different results.
func TestSweepIsDeterministic(t *testing.T) {
	a := resultsJSON(t, smallSweep(9, 1))
	b := resultsJSON(t, smallSweep(9, 4))
	c := resultsJSON(t, smallSweep(10, 2))
	if !bytes.Equal(a, b) {
		t.Error("seed 9 gave different bytes with 1 and 4 workers")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 9 and 10 gave identical results")
	}
	var doc struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
		Arms          []struct {
			Name string `json:"name"`
			Runs []struct {
				Rate    float64 `json:"rate"`
				Offered int     `json:"offered"`
			} `json:"runs"`
		} `json:"arms"`
	}
	if err := json.Unmarshal(a, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != ResultsSchema || doc.SchemaVersion != 1 || len(doc.Arms) != 5 {
		t.Fatalf("document %s v%d with %d arms, want %s v1 with 5", doc.Schema, doc.SchemaVersion, len(doc.Arms), ResultsSchema)
	}
	for _, arm := range doc.Arms {
		if len(arm.Runs) != 2 || arm.Runs[0].Rate != 2 || arm.Runs[1].Rate != 5 || arm.Runs[0].Offered == 0 {
			t.Errorf("arm %s runs %+v, want rates 2 and 5 with offers", arm.Name, arm.Runs)
		}
	}
}

func TestTable(t *testing.T) {
	res, err := smallSweep(1, 2).Run()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, want := range []string{"3 engines, trace balanced 40 s → prefill-heavy 40 s → decode-heavy 40 s, seed 1",
		"arm  ", "sustained  flips", "1P2D", "2P1D", "aggregated", "adaptive", "arrow"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "adaptive sustains ") || !strings.Contains(last, "the best static split, ") {
		t.Errorf("last line %q is not the adaptive-versus-static verdict", last)
	}
}

func TestCompare(t *testing.T) {
	arm := func(name, policy string, agg bool, rps float64) ArmResult {
		return ArmResult{Arm: Arm{Name: name, Policy: policy, Aggregated: agg}, SustainedRPS: rps}
	}
	cases := []struct {
		name string
		arms []ArmResult
		want Comparison
		line string
	}{
		{"beats", []ArmResult{arm("1P1D", "static", false, 4), arm("agg", "static", true, 9), arm("adaptive", "reactive", false, 6)},
			Comparison{AdaptiveRPS: 6, BestStatic: "1P1D", BestStaticRPS: 4, Holds: true}, "matches or beats"},
		{"ties go to the first split", []ArmResult{arm("1P2D", "static", false, 4), arm("2P1D", "static", false, 4), arm("adaptive", "reactive", false, 4)},
			Comparison{AdaptiveRPS: 4, BestStatic: "1P2D", BestStaticRPS: 4, Holds: true}, "matches or beats"},
		{"falls short", []ArmResult{arm("1P2D", "static", false, 2), arm("2P1D", "static", false, 5), arm("adaptive", "reactive", false, 4)},
			Comparison{AdaptiveRPS: 4, BestStatic: "2P1D", BestStaticRPS: 5}, "does NOT reach"},
		{"no adaptive arm", []ArmResult{arm("1P1D", "static", false, 4)},
			Comparison{BestStatic: "1P1D", BestStaticRPS: 4}, "does NOT reach"},
	}
	for _, c := range cases {
		got := compare(c.arms)
		if got != c.want || !strings.Contains(got.Line(), c.line) {
			t.Errorf("%s: %+v %q, want %+v and %q", c.name, got, got.Line(), c.want, c.line)
		}
	}
}

func TestSustainedIsTheHighestRateAtTarget(t *testing.T) {
	a := ArmResult{Runs: []*Result{{Attainment: 0.95, Flips: 1}, {Attainment: 0.85, Flips: 2}, {Attainment: 0.9, Flips: 3}}}
	a.summarise([]float64{1, 2, 3}, 0.9)
	if a.SustainedRPS != 3 || a.Flips != 6 {
		t.Errorf("sustained %v flips %d, want 3 and 6", a.SustainedRPS, a.Flips)
	}
}

func TestSweepReplaysATrace(t *testing.T) {
	tr := mustGenerate(t, MovingSegments(20), 2, 4)
	s := Sweep{Fleet: DemoFleet(2), Arms: []Arm{Static(1, 2)}, Replay: &tr, Target: 0.9}
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	run := res.Arms[0].Runs[0]
	if res.Trace.Source != "replay" || len(res.Rates) != 1 || res.Rates[0] != tr.Rate() || run.Offered != len(tr.Arrivals) {
		t.Errorf("replay at its native rate: source %s rates %v offered %d, want replay [%v] %d",
			res.Trace.Source, res.Rates, run.Offered, tr.Rate(), len(tr.Arrivals))
	}
}

func TestSweepRejects(t *testing.T) {
	base := smallSweep(1, 1)
	cases := []struct {
		name string
		edit func(*Sweep)
		want string
	}{
		{"no arms", func(s *Sweep) { s.Arms = nil }, "at least one arm"},
		{"no rates", func(s *Sweep) { s.Rates = nil }, "at least one offered rate"},
		{"bad rate", func(s *Sweep) { s.Rates = []float64{1, -2} }, "rates must be positive"},
		{"bad target", func(s *Sweep) { s.Target = 1.5 }, "must be in (0, 1]"},
		{"bad arm", func(s *Sweep) { s.Arms = []Arm{{Name: "x", Policy: "nope"}} }, "arm x at 2 req/s"},
	}
	for _, c := range cases {
		s := base
		c.edit(&s)
		if _, err := s.Run(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
}
