package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// RunTail is what a resuming router needs from the journal about the run
// it replaces: the run's admission records and terminal rows, and which
// admitted requests never got a terminal row.
type RunTail struct {
	Run string
	// Admitted maps each admitted rid of the run to its record.
	Admitted map[string]Admission
	// Rows are the run's terminal rows, in file order.
	Rows []*RequestRow
	// closed holds every rid with a terminal row, in any run: a later
	// run may already have closed a lost request.
	closed map[string]bool
	// Truncated says the file ended mid-row (rows before it are whole).
	Truncated bool
	// Damaged counts the run's lines that did not parse (a row torn by a
	// crash, then ended by the next writer); FirstDamaged is the first's
	// line number. They are skipped: one torn row must not stop a resume.
	Damaged, FirstDamaged int
}

// Lost returns the admission records without a terminal row, oldest
// first: the requests the run's router was killed in the middle of.
func (t *RunTail) Lost() []Admission {
	var out []Admission
	for rid, a := range t.Admitted {
		if !t.closed[rid] {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Admission) int {
		if a.Arrived != b.Arrived {
			if a.Arrived < b.Arrived {
				return -1
			}
			return 1
		}
		return bytes.Compare([]byte(a.RID), []byte(b.RID))
	})
	return out
}

// ScanRun reads the journal at path for run, every file of a rotated
// set (SetFiles) in order. Rows of other runs are skipped without
// decoding, except the router_lost rows a later run wrote, so a journal
// of many runs costs one pass of line reads. A truncated final line ends
// the scan (Truncated is set); other lines that do not parse are counted
// in Damaged and skipped.
func ScanRun(path, run string) (*RunTail, error) {
	files, err := SetFiles(path)
	if err != nil {
		return nil, err
	}
	t := &RunTail{Run: run, Admitted: map[string]Admission{}, closed: map[string]bool{}}
	for _, name := range files {
		if err := t.scanFile(name); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *RunTail) scanFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read journal %s: %w", path, err)
	}
	defer f.Close()
	prefix := []byte(`{"schema":"` + Schema + `","schema_version":` + strconv.Itoa(SchemaVersion) + `,"run":` + strconv.Quote(t.Run) + `,`)
	lostMark := []byte(`"reason":"` + fault.RouterLost + `"`)
	br := bufio.NewReaderSize(f, 256<<10)
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			t.Truncated = len(bytes.TrimSpace(raw)) > 0
			return nil
		}
		if err != nil {
			return fmt.Errorf("read journal %s:%d: %w", path, line, err)
		}
		mine := bytes.HasPrefix(raw, prefix)
		if !mine && !bytes.Contains(raw, lostMark) {
			continue
		}
		rec, perr := parseLine(raw)
		if perr != nil {
			if mine {
				if t.Damaged == 0 {
					t.FirstDamaged = line
				}
				t.Damaged++
			}
			continue
		}
		t.add(rec, mine)
	}
}

func (t *RunTail) add(rec Record, mine bool) {
	switch {
	case rec.Kind == KindRequest:
		t.closed[rec.Request.RID] = true
		if mine {
			t.Rows = append(t.Rows, rec.Request)
		}
	case rec.Kind == KindAdmission && mine:
		t.Admitted[rec.Admission.RID] = *rec.Admission
	}
}
