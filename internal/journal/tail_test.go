package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// tailRIDs is one Read's request rids.
func tailRIDs(t *testing.T, tl *Tail) ([]string, TailRead) {
	t.Helper()
	var rids []string
	res, err := tl.Read(func(b *Brief) error {
		if b.Kind == KindRequest {
			rids = append(rids, string(b.RID))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rids, res
}

// A Tail delivers each row once, across rotations (the rotated file is
// the same inode under a new name) and rows a sharing writer appended to
// the just-rotated file; each Read consumes only the bytes appended since
// the one before.
func TestTailDeliversEachRowOnceAcrossRotations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	w, err := Open(path, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	late, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0) // a writer that has not followed yet
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	row := func(rid string) {
		if err := w.Request(&RequestRow{RID: rid, InputLen: 1, Terminal: TerminalCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		var n int64
		files, _ := SetFiles(path)
		for _, f := range files {
			fi, _ := os.Stat(f)
			n += fi.Size()
		}
		return n
	}
	tl := NewTail(path)
	row("a")
	rids, res := tailRIDs(t, tl)
	if fmt.Sprint(rids) != "[a]" || res.Bytes != size() {
		t.Fatalf("first read: %v, %+v; want [a] and every byte (%d)", rids, res, size())
	}
	before := size()
	row("b")
	w.mu.Lock()
	err = w.rotateLocked()
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	row("c")
	fmt.Fprintf(late, "%s\n", env(1, `"rid":"late","terminal":"completed"}`)) // lands in the rotated file
	rids, res = tailRIDs(t, tl)
	if fmt.Sprint(rids) != "[b late c]" || res.Bytes != size()-before {
		t.Fatalf("after a rotation: %v, %+v; want [b late c] and only the %d new bytes", rids, res, size()-before)
	}
	if rids, res = tailRIDs(t, tl); len(rids) != 0 || res.Bytes != 0 || res.Read != 0 {
		t.Fatalf("nothing new: %v, %+v", rids, res)
	}
}

// A final line without its newline waits for the writer: the next Read
// delivers it whole. In a rotated file that stopped growing it is a torn
// row, counted once.
func TestTailHoldsAPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	line := env(1, `"rid":"p","terminal":"completed"}`)
	os.WriteFile(path, []byte(meta1+"\n"+line[:20]), 0o644)
	tl := NewTail(path)
	if rids, _ := tailRIDs(t, tl); len(rids) != 0 {
		t.Fatalf("a partial line was delivered: %v", rids)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	fmt.Fprintf(f, "%s\n%s", line[20:], line[:10])
	f.Close()
	if rids, _ := tailRIDs(t, tl); fmt.Sprint(rids) != "[p]" {
		t.Fatalf("the finished line: %v, want [p]", rids)
	}
	os.Rename(path, path+".1")
	os.WriteFile(path, []byte(meta1+"\n"), 0o644)
	for range 3 {
		tailRIDs(t, tl)
	}
	if tr := tl.Torn(); tr.Rows != 1 || tr.First != path+".1:3" {
		t.Fatalf("torn %+v, want the rotated file's unfinished line once, at %s.1:3", tr, path)
	}
}
