package journal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two routers sharing one journal (a primary and its standby beside it)
// rotate it at 4 KiB while both write: every row lands in the set exactly
// once, and every file starts with a meta row, so each still reads as a
// whole journal. Before rotation was
// serialised, the two renames collided and one writer's file was renamed
// over the other's.
func TestSharedJournalRotationLosesNoRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	const writers, perWriter = 2, 600
	ws := make([]*Writer, writers)
	for i := range ws {
		o := testOpts(uint64(10 + i))
		o.MaxBytes = 4096
		w, err := Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	var wg sync.WaitGroup
	for i, w := range ws {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := g; n < perWriter; n += 2 {
					if err := w.Request(completed(fmt.Sprintf("w%d-%04d", i, n))); err != nil {
						t.Error(err)
						return
					}
					if n%50 == 0 {
						time.Sleep(time.Millisecond) // let the other writer rotate under this one
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, w := range ws {
		w.Close()
	}
	seen := sharedRows(t, path)
	for i := range writers {
		for n := range perWriter {
			rid := fmt.Sprintf("w%d-%04d", i, n)
			if seen[rid] != 1 {
				t.Errorf("row %s appears %d times in the set, want once", rid, seen[rid])
			}
		}
	}
}

// sharedRows counts each rid across the set at path, checking that every
// file starts with a meta row.
func sharedRows(t *testing.T, path string) map[string]int {
	t.Helper()
	files, err := SetFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("set %v: want several rotated files at 4 KiB", files)
	}
	seen := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			rec, err := parseLine(sc.Bytes())
			if err != nil {
				t.Fatalf("%s:%d: %v", name, line, err)
			}
			if line == 1 && rec.Kind != KindMeta {
				t.Errorf("%s starts with a %v row, want the meta row", name, rec.Kind)
			}
			if rec.Kind == KindRequest {
				seen[rec.Request.RID]++
			}
		}
		f.Close()
	}
	if strings.Contains(strings.Join(files, " "), ".lock") {
		t.Errorf("the set %v lists the lock file", files)
	}
	return seen
}
