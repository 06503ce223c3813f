package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runs", "deep", "state.json") // parents created
	if err := Write(p, fullDoc()); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run != fullDoc().Run || got.Counters.Served != 7 {
		t.Errorf("read back %+v", got)
	}
}

func TestWriteInvalidLeavesPrevious(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	if err := Write(p, emptyDoc()); err != nil {
		t.Fatal(err)
	}
	bad := emptyDoc()
	bad.Epoch = -1
	err := Write(p, bad)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "field epoch") {
		t.Fatalf("error = %v, want the path and the field", err)
	}
	if _, err := Read(p); err != nil {
		t.Fatalf("previous document damaged: %v", err)
	}
}

func TestReadMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	_, err := Read(p)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error = %v, want fs.ErrNotExist (a cold start)", err)
	}
	var re *ReadError
	if errors.As(err, &re) {
		t.Error("a missing file is a cold start, not a ReadError")
	}
}

func TestReadUnusable(t *testing.T) {
	good, err := Encode(emptyDoc())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, content, want string
	}{
		{"torn", string(good[:40]), "is not valid JSON"},
		{"empty", "", "is empty"},
		{"newer", strings.Replace(string(good), `"schema_version": 1`, `"schema_version": 2`, 1),
			"handoff schema version 2 is newer than this build (writes and reads 1)"},
		{"invalid", strings.Replace(string(good), `"prefill"`, `"both"`, 1), "field roles.e0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(p)
			var re *ReadError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v, want a *ReadError (fatal at startup)", err)
			}
			msg := err.Error()
			for _, w := range []string{p + ": handoff", tc.want, "to cold-start, move the file aside (mv " + p} {
				if !strings.Contains(msg, w) {
					t.Errorf("error = %q\nwant it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error must be one line and not a cold start: %q", msg)
			}
		})
	}
}

// Concurrent writers and readers: every read sees a complete document
// that one writer wrote, and no temporary file is left behind.
func TestWriteConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := Write(p, emptyDoc()); err != nil {
		t.Fatal(err)
	}
	const writers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				h := fullDoc()
				h.Run = fmt.Sprintf("w%d-%d", w, i)
				if err := Write(p, h); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range each {
				if _, err := Read(p); err != nil {
					errs <- fmt.Errorf("reader saw a partial document: %w", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.Run, "w") {
		t.Errorf("final run %q is not one a writer wrote", h.Run)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only state.json", len(entries))
	}
}
