package store

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// about is a record of kind boot about subject, observed at second i.
func about(subject map[string]string, quantity string, i int) evidence.Record {
	v := "healthy"
	return evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject: subject, Claim: evidence.Claim{Quantity: quantity, Verdict: &v},
		Engine: evidence.Engine{Name: "vllm", Version: "0.11.0", Packages: []string{}}, Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}},
		Display: map[string]any{},
	}, ports.NewFake(time.Date(2026, 9, 10, 0, 0, i, 0, time.UTC)))
}

// mixed fills a store with records over three artifacts, two hardware
// classes and two quantities; raw ones are written as a build without the
// index wrote them.
func mixed(t *testing.T, raw bool) *Store {
	t.Helper()
	s := Open(t.TempDir())
	for i := range 24 {
		subj := map[string]string{"artifact": fmt.Sprintf("a%d", i%3), "hardware_class": fmt.Sprintf("h%d", i%2)}
		if i%5 == 0 {
			subj["endpoint"] = "e1"
		}
		q := "boot"
		if i%4 == 0 {
			q = "engine_support"
		}
		r := about(subj, q, i)
		if raw {
			writeRaw(t, s, r)
		} else if _, err := s.PutRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func writeRaw(t *testing.T, s *Store, r evidence.Record) string {
	t.Helper()
	b, d, err := evidence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.Root, recordsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path(recordsDir, d), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func digests(ss []Stored) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Digest)
	}
	return out
}

var queries = []struct {
	name  string
	terms []Term
}{
	{"one artifact", []Term{SubjectTerm("artifact", "a1")}},
	{"artifact or endpoint", []Term{SubjectTerm("artifact", "a2"), SubjectTerm("endpoint", "e1")}},
	{"hardware class", []Term{SubjectTerm("hardware_class", "h0")}},
	{"quantity", []Term{QuantityTerm("engine_support")}},
	{"quantity is not a subject", []Term{SubjectTerm("quantity", "engine_support")}},
	{"no such artifact", []Term{SubjectTerm("artifact", "a9")}},
	{"empty value reads all", []Term{SubjectTerm("endpoint", "")}},
	{"no terms", nil},
}

// TestFindEqualsScan: for every query the index answers exactly what
// reading every record answers, whether the records were written with
// the index or by an older build without it.
func TestFindEqualsScan(t *testing.T) {
	for _, raw := range []bool{false, true} {
		s := mixed(t, raw)
		for _, q := range queries {
			want, err := s.scan(q.terms)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Find(q.terms...)
			if err != nil {
				t.Fatalf("raw=%v %s: %v", raw, q.name, err)
			}
			if !reflect.DeepEqual(digests(got), digests(want)) {
				t.Errorf("raw=%v %s: Find %v, scan %v", raw, q.name, digests(got), digests(want))
			}
		}
	}
	s := mixed(t, false)
	if got, _ := s.Find(SubjectTerm("artifact", "a1")); len(got) != 8 {
		t.Fatalf("a1 has 8 records, Find gave %d", len(got))
	}
}

// TestFindReadsOnlyNamedRecords: a damaged record of another subject does
// not stop a lookup (a full scan fails on it), so the index really spares
// the other records; a damaged record of the asked subject is reported.
func TestFindReadsOnlyNamedRecords(t *testing.T) {
	s := mixed(t, false)
	other := about(map[string]string{"artifact": "zz"}, "boot", 99)
	d, err := s.PutRecord(other)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := evidence.Encode(about(map[string]string{"artifact": "zz"}, "boot", 98))
	if err := os.WriteFile(s.path(recordsDir, d), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.scan([]Term{SubjectTerm("artifact", "a1")}); err == nil {
		t.Fatal("the full scan read the damaged record without complaint: the test proves nothing")
	}
	if got, err := s.Find(SubjectTerm("artifact", "a1")); err != nil || len(got) != 8 {
		t.Fatalf("Find a1 with a damaged zz record: %d records, %v", len(got), err)
	}
	if _, err := s.Find(SubjectTerm("artifact", "zz")); err == nil || !strings.Contains(err.Error(), "not to the file name") {
		t.Fatalf("Find zz over its damaged record: %v", err)
	}
}

// TestIndexSelfHeals: whatever happened to the index, a lookup gives the
// full scan's answer and leaves an index naming every record.
func TestIndexSelfHeals(t *testing.T) {
	damage := map[string]func(t *testing.T, s *Store){
		"missing": func(t *testing.T, s *Store) { os.RemoveAll(filepath.Join(s.Root, indexDir)) },
		"corrupt": func(t *testing.T, s *Store) {
			for _, p := range segPaths(t, s) {
				b, _ := os.ReadFile(p)
				os.WriteFile(p, []byte(strings.Replace(string(b), "1220", "1221", 1)), 0o644)
			}
		},
		"truncated": func(t *testing.T, s *Store) {
			for _, p := range segPaths(t, s) {
				b, _ := os.ReadFile(p)
				os.WriteFile(p, b[:len(b)/2], 0o644)
			}
		},
		"garbage segment": func(t *testing.T, s *Store) {
			b := []byte(segHeader + "x\n")
			os.WriteFile(filepath.Join(s.segDir(), hashName(b)), b, 0o644)
		},
		"other version": func(t *testing.T, s *Store) {
			b := []byte("narwhal.evidence.index 9\n")
			os.WriteFile(filepath.Join(s.segDir(), hashName(b)), b, 0o644)
		},
		"stale: records from a build without the index": func(t *testing.T, s *Store) {
			for i := range 5 {
				writeRaw(t, s, about(map[string]string{"artifact": "a1", "hardware_class": "h9"}, "boot", 100+i))
			}
		},
		"record removed by hand": func(t *testing.T, s *Store) {
			got, _ := s.Find(SubjectTerm("artifact", "a1"))
			os.Remove(s.path(recordsDir, got[0].Digest))
		},
		"crash between record and segment": func(t *testing.T, s *Store) {
			d := writeRaw(t, s, about(map[string]string{"artifact": "a1"}, "boot", 200))
			os.WriteFile(filepath.Join(s.segDir(), "."+d+".seg.tmp-1"), []byte("partial"), 0o644)
		},
	}
	for name, harm := range damage {
		t.Run(name, func(t *testing.T) {
			s := mixed(t, false)
			harm(t, s)
			for _, q := range queries {
				want, err := s.scan(q.terms)
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Find(q.terms...)
				if err != nil || !reflect.DeepEqual(digests(got), digests(want)) {
					t.Fatalf("%s: Find %v (%v), scan %v", q.name, digests(got), err, digests(want))
				}
			}
			names, _ := s.List()
			if left := unindexed(names, s.readSegments()); len(left) > 0 {
				t.Fatalf("after a lookup %d records are still unindexed", len(left))
			}
		})
	}
}

func segPaths(t *testing.T, s *Store) []string {
	t.Helper()
	segs, err := s.segments()
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments to damage: %v", err)
	}
	var out []string
	for _, sg := range segs {
		out = append(out, filepath.Join(s.segDir(), sg.name))
	}
	return out
}

func hashName(b []byte) string { return segName(b) }

// TestPutRecordIndexesAndCompacts: every PutRecord leaves its record
// indexed (no lookup has to re-read it), and merging keeps the segment
// count logarithmic rather than one per record.
func TestPutRecordIndexesAndCompacts(t *testing.T) {
	s := Open(t.TempDir())
	for i := range 300 {
		if _, err := s.PutRecord(about(map[string]string{"artifact": fmt.Sprintf("a%d", i%7)}, "boot", i)); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := s.List()
	if left := unindexed(names, s.readSegments()); len(left) != 0 {
		t.Fatalf("%d of %d records unindexed after PutRecord", len(left), len(names))
	}
	segs, _ := s.segments()
	if len(segs) > 3*mergeFanout {
		t.Fatalf("%d segments for %d records: merging does not keep up", len(segs), len(names))
	}
	if got, _ := s.Find(SubjectTerm("artifact", "a3")); len(got) != 43 {
		t.Fatalf("a3 has 43 records, Find gave %d", len(got))
	}
	// Storing the same record again writes nothing, index included.
	before, _ := s.segments()
	if _, err := s.PutRecord(about(map[string]string{"artifact": "a0"}, "boot", 0)); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.segments(); !reflect.DeepEqual(before, after) {
		t.Fatalf("an idempotent put changed the index: %v → %v", before, after)
	}
}

func TestLevel(t *testing.T) {
	for _, c := range []struct {
		size int64
		want int
	}{{0, 0}, {4095, 0}, {4096, 1}, {4 * 4096, 2}, {16*4096 - 1, 2}, {16 * 4096, 3}} {
		if got := level(c.size); got != c.want {
			t.Errorf("level(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// TestMergeThatReproducesAnInput: when the merge of a level equals one of
// its inputs (the others held nothing new), that input is kept, not
// removed with the rest.
func TestMergeThatReproducesAnInput(t *testing.T) {
	s := Open(t.TempDir())
	var ds []string
	tails := map[string]string{}
	for i := range 2 {
		r := about(map[string]string{"artifact": "a"}, "boot", i)
		d := writeRaw(t, s, r)
		ds, tails[d] = append(ds, d), termsOf(r)
	}
	for _, set := range [][]string{ds, ds[:1], ds[1:], {}} {
		if _, err := s.writeSegment(append([]string{}, set...), tails); err != nil {
			t.Fatal(err)
		}
	}
	if segs, _ := s.segments(); len(segs) != mergeFanout {
		t.Fatalf("want %d segments to merge, have %d", mergeFanout, len(segs))
	}
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
	names, _ := s.List()
	segs, _ := s.segments()
	if left := unindexed(names, s.readSegments()); len(segs) != 1 || len(left) != 0 {
		t.Fatalf("after the merge: %d segments, %d records unindexed", len(segs), len(left))
	}
}

// TestConcurrentWritersAndReaders: writers racing each other's merges
// and readers racing both never lose a record from a lookup.
func TestConcurrentWritersAndReaders(t *testing.T) {
	root := t.TempDir()
	const writers, each = 4, 40
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	for w := range writers {
		go func() {
			s := Open(root) // a store per goroutine, as separate processes have
			for i := range each {
				if _, err := s.PutRecord(about(map[string]string{"artifact": fmt.Sprintf("a%d", i%3)}, "boot", w*each+i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		s := Open(root)
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if _, err := s.Find(SubjectTerm("artifact", "a1")); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	s := Open(root)
	want, _ := s.scan([]Term{SubjectTerm("artifact", "a1")})
	got, err := s.Find(SubjectTerm("artifact", "a1"))
	if err != nil || len(want) != writers*13 /* i%3 == 1 for 13 of 0..39 */ || !reflect.DeepEqual(digests(got), digests(want)) {
		t.Fatalf("Find %d records (%v), scan %d", len(got), err, len(want))
	}
}
