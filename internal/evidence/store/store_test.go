package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func record(verdict string) evidence.Record {
	v := verdict
	return evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject:    map[string]string{"artifact": "a"},
		Claim:      evidence.Claim{Quantity: "boot", Verdict: &v},
		Engine:     evidence.Engine{Name: "vllm", Version: "0.29.0"},
		Provenance: evidence.Provenance{Producer: "test"},
	}, ports.NewFake(time.Date(2026, 9, 10, 0, 0, 0, 0, time.UTC)))
}

func TestPutGetRoundTripAndIdempotent(t *testing.T) {
	s := Open(t.TempDir())
	d, err := s.PutRecord(record("healthy"))
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := s.PutRecord(record("healthy")); err != nil || d2 != d {
		t.Fatalf("second put: %s %v", d2, err)
	}
	r, b, err := s.Get(d)
	if err != nil || *r.Claim.Verdict != "healthy" {
		t.Fatalf("Get: %v", err)
	}
	disk, _ := os.ReadFile(filepath.Join(s.Root, "records", d+".json"))
	if string(disk) != string(b) || strings.HasSuffix(string(disk), "\n") {
		t.Fatalf("file is not exactly the canonical bytes")
	}
	if ls, _ := s.List(); len(ls) != 1 || ls[0] != d {
		t.Fatalf("List = %v", ls)
	}
}

// TestStoreRejectsUncanonical: non-canonical spellings are refused and
// nothing is written.
func TestStoreRejectsUncanonical(t *testing.T) {
	s := Open(t.TempDir())
	b, _, err := evidence.Encode(record("healthy"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(b)
	for name, in := range map[string]string{
		"whitespace":     strings.Replace(c, ":", ": ", 1),
		"newline":        c + "\n",
		"reordered":      `{"schema_version":1,` + strings.Replace(c[1:], `"schema_version":1,`, "", 1),
		"escaped slash":  strings.Replace(c, `"test"`, `"te\/st"`, 1),
		"upper escape":   strings.Replace(c, `"test"`, `"t\u0065st"`, 1),
		"one point zero": strings.Replace(c, `"schema_version":1`, `"schema_version":1.0`, 1),
		"unknown field":  strings.Replace(c, `{"claim"`, `{"bogus":1,"claim"`, 1),
	} {
		if in == c {
			t.Fatalf("%s: mutation did nothing", name)
		}
		if _, err := s.Put([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if ls, _ := s.List(); len(ls) != 0 {
		t.Fatalf("refused input left files: %v", ls)
	}
}

func TestReadReverifies(t *testing.T) {
	s := Open(t.TempDir())
	d, _ := s.PutRecord(record("healthy"))
	other, _, _ := evidence.Encode(record("failed"))
	p := filepath.Join(s.Root, "records", d+".json")
	if err := os.WriteFile(p, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(d); err == nil || !strings.Contains(err.Error(), "not to the file name") {
		t.Fatalf("tampered record read: %v", err)
	}
	if n, probs := s.Verify(); n != 1 || len(probs) != 1 {
		t.Fatalf("Verify: %d files, problems %v", n, probs)
	}
	if _, err := s.PutRecord(record("healthy")); err == nil {
		t.Fatal("put over a corrupted file succeeded silently")
	}
}

func TestReleaseDigestIdentifiesTheSet(t *testing.T) {
	build := func() string {
		s := Open(t.TempDir())
		for _, v := range []string{"healthy", "failed", "degraded"} {
			if _, err := s.PutRecord(record(v)); err != nil {
				t.Fatal(err)
			}
		}
		d, err := s.WriteRelease("2026-09", nil)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := s.GetRelease(d)
		if err != nil || len(rel.RecordDigests) != 3 {
			t.Fatalf("GetRelease: %+v %v", rel, err)
		}
		if n, probs := s.Verify(); n != 4 || len(probs) != 0 {
			t.Fatalf("Verify: %d %v", n, probs)
		}
		return d
	}
	if a, b := build(), build(); a != b {
		t.Fatalf("same records, different release digests: %s %s", a, b)
	}
	s := Open(t.TempDir())
	if _, err := s.WriteRelease("x", []string{"1220" + strings.Repeat("0", 64)}); err == nil {
		t.Fatal("release over a missing record accepted")
	}
}
