package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// tornJournal writes a rotated set whose files each hold one torn row,
// as a writer killed mid-row leaves it once the next writer has opened
// the file (endTornLine ends the line): part 1 holds rows a0..a2 with a
// torn row after a1, the active file rows b0..b2 with a torn row after
// b0. It returns the path and the lines of the torn rows.
func tornJournal(t *testing.T) (string, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	write := func(rids ...string) {
		w, err := Open(path, testOpts(1))
		if err != nil {
			t.Fatal(err)
		}
		for _, rid := range rids {
			if rid == "" { // the kill: half a row, no newline
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprint(f, `{"schema":"narwhal.journal","schema_version":1,"run":"x","rid":"torn","termi`)
				f.Close()
				continue
			}
			if err := w.Request(&RequestRow{RID: rid, InputLen: 1, Terminal: TerminalCompleted}); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
	}
	write("a0", "a1", "")
	write("a2") // this open ends the torn line
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write("b0", "")
	write("b1", "b2")
	return path, []string{path + ".1:4", path + ":3"}
}

// Every reader skips a torn row, keeps every whole row around it and
// says how many it skipped and where the first was; before, the first
// torn row ended the read (the evidence pass and narwhal report then
// saw nothing).
func TestEveryReaderSkipsAndCountsTornRows(t *testing.T) {
	path, at := tornJournal(t)
	want := []string{"a0", "a1", "a2", "b0", "b1", "b2"}
	readers := map[string]func() ([]string, Torn, error){
		"ReadFile": func() ([]string, Torn, error) {
			var rids []string
			var torn Torn
			for _, f := range []string{path + ".1", path} {
				j, err := ReadFile(f)
				if err != nil {
					return nil, torn, err
				}
				for _, r := range j.Requests {
					rids = append(rids, r.Request.RID)
				}
				torn.Merge(j.Torn)
			}
			return rids, torn, nil
		},
		"OpenSet": func() ([]string, Torn, error) {
			s, err := OpenSet(path)
			if err != nil {
				return nil, Torn{}, err
			}
			defer s.Close()
			var rids []string
			for {
				rec, err := s.Next()
				if errors.Is(err, io.EOF) {
					return rids, s.Torn(), nil
				}
				if err != nil {
					return nil, s.Torn(), err
				}
				if rec.Kind == KindRequest {
					rids = append(rids, rec.Request.RID)
				}
			}
		},
		"ScanBriefs": func() ([]string, Torn, error) {
			var rids []string
			torn, err := ScanBriefs(path, func(b *Brief) error {
				if b.Kind == KindRequest {
					rids = append(rids, string(b.RID))
				}
				return nil
			})
			return rids, torn, err
		},
		"Tail": func() ([]string, Torn, error) {
			var rids []string
			tl := NewTail(path)
			_, err := tl.Read(func(b *Brief) error {
				if b.Kind == KindRequest {
					rids = append(rids, string(b.RID))
				}
				return nil
			})
			return rids, tl.Torn(), err
		},
	}
	for name, read := range readers {
		rids, torn, err := read()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fmt.Sprint(rids) != fmt.Sprint(want) {
			t.Errorf("%s: rows %v, want %v", name, rids, want)
		}
		if torn.Rows != 2 || torn.First != at[0] {
			t.Errorf("%s: torn %+v, want 2 rows, the first at %s", name, torn, at[0])
		}
	}
}
