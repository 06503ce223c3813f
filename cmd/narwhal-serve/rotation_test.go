package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/narwhal-go/narwhal/internal/journal"
)

// --journal-max-bytes rotates the journal while serving: every file
// starts with a meta row, and the set reads back with one terminal row
// per request.
func TestJournalRotatesAtMaxBytes(t *testing.T) {
	w := newWorld(t, nil)
	jpath := filepath.Join(w.dir, "journal.jsonl")
	r := w.start(freePort(t), "--journal", jpath, "--journal-max-bytes", "4096")
	const n = 12
	rids := map[string]bool{}
	for range n {
		_, rid, err := stream(context.Background(), r.base, 4)
		if err != nil {
			t.Fatal(err)
		}
		rids[rid] = true
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.errb.String())
	}
	files, err := journal.SetFiles(jpath)
	if err != nil || len(files) < 2 {
		t.Fatalf("set %v, %v: want the journal rotated at 4096 bytes", files, err)
	}
	set, err := journal.OpenSet(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	got, metas := 0, 0
	for {
		rec, err := set.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case journal.KindMeta:
			metas++
		case journal.KindRequest:
			if !rids[rec.Request.RID] {
				t.Fatalf("row %s was not one of the requests sent", rec.Request.RID)
			}
			got++
		}
	}
	if got != n || metas != len(files) {
		t.Fatalf("%d request rows in %d files with %d meta rows; want %d rows and a meta row per file", got, len(files), metas, n)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.HasPrefix(string(b), `{"meta":`) || int64(len(b)) > 4096 {
			t.Fatalf("%s: %d bytes, starts %.40q", f, len(b), b)
		}
	}
}

func TestJournalMaxBytesTooSmallIsUsage(t *testing.T) {
	w := newWorld(t, nil)
	cmd := exec.Command(binary, "--fleet", w.fleet, "--port", fmt.Sprint(freePort(t)), "--journal-max-bytes", "100")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "at least 4096") {
		t.Fatalf("exit %d:\n%s", cmd.ProcessState.ExitCode(), out)
	}
}
