package evidence

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func TestEveryFieldClassified(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Record](), reflect.TypeFor[Claim](), reflect.TypeFor[Engine](), reflect.TypeFor[Provenance](), reflect.TypeFor[Release]()} {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if ev := f.Tag.Get("ev"); ev != "id" && ev != "display" {
				t.Errorf("%s.%s: ev tag %q, want id or display", typ.Name(), f.Name, ev)
			}
			if strings.Contains(f.Tag.Get("json"), ",") {
				t.Errorf("%s.%s: json tag options are forbidden on record types", typ.Name(), f.Name)
			}
		}
	}
}

func TestDisplayFieldsDoNotChangeFingerprint(t *testing.T) {
	a := rec(KindBoot, ScopeBoot, MaintainerLabMeasured, VerdictHealthy, "0.29.0", map[string]string{"artifact": "x"})
	b := a
	b.ObservedAt = "2027-01-01T00:00:00Z"
	b.Display = map[string]any{"note": "again"}
	b.Provenance.ProducerVersion = "9"
	fa, _ := a.Fingerprint()
	fb, _ := b.Fingerprint()
	da, _ := a.Digest()
	db, _ := b.Digest()
	if fa != fb || da == db {
		t.Fatalf("display change: fingerprints %s %s (want equal), digests %s %s (want different)", fa, fb, da, db)
	}
	c := a
	c.Claim.Verdict = sp("failed")
	if fc, _ := c.Fingerprint(); fc == fa {
		t.Fatal("identity change kept the fingerprint")
	}
}

func TestEncodeIsCanonicalAndComplete(t *testing.T) {
	r := rec(KindBoot, ScopeBoot, MaintainerLabMeasured, VerdictHealthy, "0.29.0", map[string]string{"artifact": "x"})
	b, d, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := canon.VerifyCanonical(b); err != nil || canon.Digest(b) != d {
		t.Fatalf("encoded record not canonical or digest mismatch: %v", err)
	}
	for _, field := range []string{`"corrects":null`, `"display":{}`, `"inputs":[]`, `"packages":[]`, `"value":null`, `"license":"CDLA-Permissive-2.0"`, `"observed_at":"2026-09-10T12:00:00Z"`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("encoded record lacks %s: %s", field, b)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	base := rec(KindBoot, ScopeBoot, MaintainerLabMeasured, VerdictHealthy, "0.29.0", map[string]string{"artifact": "x"})
	cases := map[string]func(*Record){
		"newer schema":           func(r *Record) { r.SchemaVersion = 2 },
		"wrong schema":           func(r *Record) { r.Schema = "x" },
		"license":                func(r *Record) { r.License = "MIT" },
		"kind":                   func(r *Record) { r.Kind = "vibes" },
		"scope":                  func(r *Record) { r.ClaimScope = "x" },
		"status":                 func(r *Record) { r.EpistemicStatus = "guessed" },
		"level":                  func(r *Record) { r.Level = "best" },
		"measured calculation":   func(r *Record) { r.Level = CalculatedOnly },
		"empty subject":          func(r *Record) { r.Subject = nil },
		"non-ascii subject key":  func(r *Record) { r.Subject = map[string]string{"é": "x"} },
		"no verdict or value":    func(r *Record) { r.Claim.Verdict = nil },
		"bad input digest":       func(r *Record) { r.Provenance.Inputs = []string{"sha256:abc"} },
		"bad corrects":           func(r *Record) { r.Corrects = sp("x") },
		"local observed_at":      func(r *Record) { r.ObservedAt = "2026-09-10T12:00:00+02:00" },
		"no producer":            func(r *Record) { r.Provenance.Producer = "" },
		"prediction as measured": func(r *Record) { r.Kind = KindPrediction },
	}
	for name, mut := range cases {
		r := base
		mut(&r)
		if _, _, err := Encode(r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestGenerationByteIdentical: the same inputs and deterministic ports
// give byte-identical records, digests and fingerprints across runs.
func TestGenerationByteIdentical(t *testing.T) {
	gen := func() [][]byte {
		clock := ports.NewFake(t0)
		ids := ports.SeededIDs(42)
		var out [][]byte
		for i := 0; i < 5; i++ {
			r := Stamp(Record{
				Kind: KindWorkload, ClaimScope: ScopeServingPerformance, EpistemicStatus: Measured, Level: MaintainerLabMeasured,
				Subject:    map[string]string{"endpoint": "e", "application": "a"},
				Claim:      Claim{Quantity: "ttft_p99_ms", Value: fp(100 + float64(i)/3), Unit: "ms", Tolerance: 5},
				Engine:     Engine{Name: "vllm", Version: "0.29.1rc1", Packages: []string{"torch@2.8.0"}},
				Provenance: Provenance{Producer: "narwhal-bench", ProducerVersion: "0.1.0"},
				Display:    map[string]any{"attempt_id": ids.NewID(), "samples": 2048},
			}, clock)
			b, _, err := Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
			clock.Advance(time.Minute)
		}
		return out
	}
	a, b := gen(), gen()
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("run 2 differs at record %d:\n%s\n%s", i, a[i], b[i])
		}
	}
	if bytes.Equal(a[0], a[1]) {
		t.Fatal("different records encoded the same: the test cannot fail")
	}
}
