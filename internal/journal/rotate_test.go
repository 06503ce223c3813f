package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A writer with MaxBytes rotates into <path>.1, <path>.2, …; each file is
// a whole journal of the same run, and the set reads back as one, in
// order, every row once.
func TestRotationSetReadsAsOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.jsonl")
	o := testOpts(3)
	o.MaxBytes = 2048
	w, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := w.Request(completed(fmt.Sprintf("r%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files, err := SetFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 || files[0] != path+".1" || files[len(files)-1] != path {
		t.Fatalf("set files %v: want <path>.1 … <path>", files)
	}
	for i, f := range files {
		st, _ := os.Stat(f)
		ls := lines(t, f)
		want := fmt.Sprintf(`"part":%d}}`, i+1)
		if !strings.HasPrefix(ls[0], `{"meta":`) || !strings.HasSuffix(ls[0], want) || !strings.Contains(ls[0], `"started":"2026-09-21T14:13:20Z"`) {
			t.Fatalf("%s starts with %s; want a meta row with the run's start and %s", f, ls[0], want)
		}
		if st.Size() > o.MaxBytes {
			t.Fatalf("%s holds %d bytes, over MaxBytes %d", f, st.Size(), o.MaxBytes)
		}
	}
	s, err := OpenSet(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rids []string
	metas := 0
	for {
		rec, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case KindMeta:
			metas++
		case KindRequest:
			if rec.Run != w.Run() {
				t.Fatalf("row of run %s in a set written by run %s", rec.Run, w.Run())
			}
			rids = append(rids, rec.Request.RID)
		}
	}
	if len(rids) != n || rids[0] != "r00" || rids[n-1] != fmt.Sprintf("r%02d", n-1) || metas != len(files) {
		t.Fatalf("read %d rows (first %v), %d metas; want %d rows in order and one meta per file (%d)", len(rids), rids[:1], metas, n, len(files))
	}
}

// Rotation numbers continue after the highest rotated file, so a second
// run never overwrites the first's; ScanRun sees the run across files.
func TestRotationContinuesNumberingAndScanRunSpansFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	o := testOpts(4)
	o.MaxBytes = 1500
	for run := range 2 {
		w, err := Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			rid := fmt.Sprintf("run%d-%d", run, i)
			if err := w.Admitted(Admission{RID: rid, Arrived: float64(i)}); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := w.Request(completed(rid)); err != nil {
					t.Fatal(err)
				}
			}
		}
		tail, err := ScanRun(path, w.Run())
		if err != nil {
			t.Fatal(err)
		}
		if got := len(tail.Lost()); got != 5 || len(tail.Rows) != 5 {
			t.Fatalf("run %d: ScanRun found %d lost and %d rows; want 5 and 5 across the rotated files", run, got, len(tail.Rows))
		}
		w.Close()
		o.Rng = nil // a second, different run id
	}
	files, _ := SetFiles(path)
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			t.Fatalf("file %s listed twice", f)
		}
		seen[f] = true
	}
	if rotatedIndex(path, files[len(files)-2]) != len(files)-1 {
		t.Fatalf("rotated files %v are not numbered 1..N without gaps", files)
	}
}

func TestSetFilesErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := SetFiles(filepath.Join(dir, "none.jsonl")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing journal: %v", err)
	}
	// A rotated set whose active file is gone (the router stopped after a
	// rotation and someone moved it) still reads.
	p := filepath.Join(dir, "j.jsonl")
	os.WriteFile(p+".1", []byte(meta1+"\n"), 0o644)
	os.WriteFile(p+".x", []byte("junk\n"), 0o644)
	os.WriteFile(p+".01", []byte("junk\n"), 0o644)
	files, err := SetFiles(p)
	if err != nil || len(files) != 1 || files[0] != p+".1" {
		t.Fatalf("SetFiles = %v, %v; want only %s.1", files, err, p)
	}
}

// SetBytes counts the set's files and only them: not the lookalikes
// SetFiles leaves out.
func TestSetBytes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "j.jsonl")
	if _, err := SetBytes(p); err == nil {
		t.Fatal("a missing journal must be an error")
	}
	os.WriteFile(p+".1", []byte("12345"), 0o644)
	os.WriteFile(p, []byte("123"), 0o644)
	os.WriteFile(p+".x", []byte("junk\n"), 0o644)
	if n, err := SetBytes(p); err != nil || n != 8 {
		t.Fatalf("SetBytes = %d, %v; want 8 (j.jsonl.1 and j.jsonl)", n, err)
	}
}

func TestMetaStartTime(t *testing.T) {
	m := metaOf(withDefaults(testOpts(1)), time.Unix(1790000000, 5e8))
	got, ok := m.StartTime()
	if !ok || !got.Equal(time.Unix(1790000000, 5e8)) || m.Started != "2026-09-21T14:13:20.5Z" {
		t.Fatalf("started %q → %v %v", m.Started, got, ok)
	}
	if _, ok := (Meta{}).StartTime(); ok {
		t.Fatal("a meta row without started must say so")
	}
}
