package tierd

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// The router's pass writes one serving record per engine execution from
// its journal against the accepted request, once per window, and derives
// the tiers from what is then in the store.
func TestLoopWritesServingOnce(t *testing.T) {
	f := recommended(t)
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	jw, err := journal.Open(path, journal.Options{Source: "sha256:" + strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		n, ttft, iid := 4, 0.1, "p0"
		if err := jw.Request(&journal.RequestRow{RID: fmt.Sprintf("r%d", i), Arrived: float64(i), InputLen: 10, WantedLen: &n, OutputLen: &n,
			TTFT: &ttft, Terminal: journal.TerminalCompleted, PrefillIID: &iid}); err != nil {
			t.Fatal(err)
		}
	}
	jw.Close()
	cfg := &fleet.Config{Model: "m", Engines: []fleet.Engine{{IID: "p0"}}}
	l := &Loop{Store: f.st, Fleet: cfg, JournalPath: path, Window: time.Hour, Clock: ports.NewFake(f.at.Add(time.Minute)),
		Log: slog.New(slog.DiscardHandler)}
	count := func() int {
		rs, _ := f.st.Records()
		n := 0
		for _, s := range rs {
			if s.Record.Kind == evidence.KindWorkload && s.Record.Provenance.Producer == "narwhal evidence from-journal" {
				n++
			}
		}
		return n
	}
	rep, err := l.Pass()
	if err != nil || count() != 1 {
		t.Fatalf("first pass: err %v, %d serving records, want 1", err, count())
	}
	if ep := rep.Endpoints[0]; ep.Tier != evidence.RecommendedEndpoint {
		t.Fatalf("tier %s (missing %v)", ep.Tier, ep.MissingText)
	}
	if _, err := l.Pass(); err != nil || count() != 1 {
		t.Fatalf("second pass over the same window: err %v, %d records, want still 1", err, count())
	}
}

// setBytes is the size of every file of the journal set at path.
func setBytes(t *testing.T, path string) int64 {
	t.Helper()
	n, err := journal.SetBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The pass reads a rotated journal whole the first time (a window that
// spans rotations keeps its older part), then only what was appended;
// a torn row is skipped and counted in the state, not the end of the
// pass. Before, it read only the active file, every row of it every
// pass, and a torn row stopped it.
func TestLoopReadsNewRowsAcrossRotationsAndSkipsTornRows(t *testing.T) {
	f := recommended(t)
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	rid := 0
	write := func(n int, torn bool) {
		jw, err := journal.Open(path, journal.Options{Source: "sha256:" + strings.Repeat("0", 64), MaxBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer jw.Close()
		for range n {
			out, ttft, iid := 4, 0.1, "p0"
			if err := jw.Request(&journal.RequestRow{RID: fmt.Sprintf("r%d", rid), Arrived: float64(rid), InputLen: 10, WantedLen: &out,
				OutputLen: &out, TTFT: &ttft, Terminal: journal.TerminalCompleted, PrefillIID: &iid}); err != nil {
				t.Fatal(err)
			}
			rid++
		}
		if torn { // killed mid-row: the next Open ends the line
			fh, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			fmt.Fprint(fh, `{"schema":"narwhal.journal","schema_version":1,"rid":"half`)
			fh.Close()
		}
	}
	write(20, true)
	write(10, false)
	cfg := &fleet.Config{Model: "m", Engines: []fleet.Engine{{IID: "p0"}}}
	l := &Loop{Store: f.st, Fleet: cfg, JournalPath: path, Window: time.Hour, Clock: ports.NewFake(f.at.Add(time.Minute)),
		Log: slog.New(slog.DiscardHandler)}
	offered := func() int {
		best := 0
		rs, _ := f.st.Records()
		for _, s := range rs {
			if sv, ok := s.Record.Display["serving"].(map[string]any); ok && s.Record.Provenance.Producer == "narwhal evidence from-journal" {
				best = max(best, int(sv["offered"].(float64)))
			}
		}
		return best
	}
	if files, _ := journal.SetFiles(path); len(files) < 3 {
		t.Fatalf("the journal did not rotate: %v", files)
	}
	if _, err := l.Pass(); err != nil || offered() != 30 {
		t.Fatalf("first pass: err %v, offered %d, want every row of the set (30); state %+v", err, offered(), l.JournalState())
	}
	if st := l.JournalState(); st.Torn.Rows != 1 || st.Error != "" || st.Pass.Bytes != setBytes(t, path) {
		t.Fatalf("first pass state %+v, want 1 torn row, no error, every byte (%d) read", st, setBytes(t, path))
	}
	before := setBytes(t, path)
	write(5, false)
	if _, err := l.Pass(); err != nil || offered() != 35 {
		t.Fatalf("second pass: err %v, offered %d, want 35", err, offered())
	}
	if st := l.JournalState(); st.Pass.Bytes != setBytes(t, path)-before || st.Torn.Rows != 1 {
		t.Fatalf("second pass read %d bytes, want only the %d appended; state %+v", st.Pass.Bytes, setBytes(t, path)-before, st)
	}
	if _, err := l.Pass(); err != nil || l.JournalState().Pass.Bytes != 0 {
		t.Fatalf("an idle pass read %d bytes (err %v)", l.JournalState().Pass.Bytes, err)
	}
}
