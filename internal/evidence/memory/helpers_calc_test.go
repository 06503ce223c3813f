package memory

import (
	"encoding/json"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// headersOf turns a fixture spec into the headers a reader would return,
// without touching disk (the reader has its own tests; the calculator's
// are about arithmetic).
func headersOf(t testing.TB, s fixture.Spec) (artifact.Headers, []byte) {
	t.Helper()
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	return fixture.InMemory(t, s), cfg
}

func mustFacts(t testing.TB, v string) EngineFacts {
	t.Helper()
	f, _, err := LoadFacts(v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustSeed(t testing.TB) CalibrationSet {
	t.Helper()
	s, err := SeedCalibration()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seedWithout is the seed set less the entries drop selects: a
// calibration that lacks a figure, for the unknown paths.
func seedWithout(t testing.TB, drop func(CalibrationEntry) bool) *CalibrationSet {
	t.Helper()
	s := mustSeed(t)
	out := s
	out.Entries = nil
	for _, e := range s.Entries {
		if !drop(e) {
			out.Entries = append(out.Entries, e)
		}
	}
	return &out
}

func mustGPU(t testing.TB, name string) HardwareSpec {
	t.Helper()
	g, err := LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return HardwareFor(g, 0)
}

func planOf(t testing.TB, s fixture.Spec, gpu string, l LaunchConfig) Prediction {
	t.Helper()
	h, cfg := headersOf(t, s)
	p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, gpu), Facts: mustFacts(t, "0.11.0"), Launch: l, Calibration: mustSeed(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const giB = float64(1 << 30)
