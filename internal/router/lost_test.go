package router

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

func testJournal(t *testing.T, path string, seed uint64) *journal.Writer {
	t.Helper()
	w, err := journal.Open(path, journal.Options{Source: "sha256:" + strings.Repeat("ab", 32),
		Clock: ports.NewFake(time.Unix(1790000000, 0)), Rng: ports.NewSeededRng(seed)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// The handoff was taken at 10 s of the old run with 5 offered and 3
// settled. After it the old run journalled: a completion of a request in
// flight at 10 s, a refusal that arrived later; two admitted requests
// never ended, one in flight at 10 s and one that arrived later. Resume
// counts exactly those, and offered equals the outcomes again.
func TestResumeCountsWhatTheHandoffMissed(t *testing.T) {
	cfg, store := resumeFleet(t)
	dir := t.TempDir()
	jpath, spath := filepath.Join(dir, "journal.jsonl"), filepath.Join(dir, "state.json")
	old := testJournal(t, jpath, 1)
	done := func(rid string, arrived, dur float64, terminal, reason string) {
		row := &journal.RequestRow{RID: rid, Arrived: arrived, DurationS: dur, Terminal: terminal, InputSized: true, InputLen: 8}
		if reason != "" {
			row.Reason = journal.Ptr(reason)
		}
		if terminal == journal.TerminalCompleted {
			row.TTFT = journal.Ptr(0.1)
		}
		if err := old.Request(row); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []journal.Admission{{RID: "early", Arrived: 2}, {RID: "late-done", Arrived: 8}, {RID: "lost-before", Arrived: 9}, {RID: "lost-after", Arrived: 13}} {
		if err := old.Admitted(a); err != nil {
			t.Fatal(err)
		}
	}
	done("early", 2, 2, journal.TerminalCompleted, "")
	done("late-done", 8, 4, journal.TerminalCompleted, "")
	done("refused-after", 11, 0, journal.TerminalRefused, journal.CauseQueue)
	old.Close()

	a, err := New(cfg, store, Options{HA: HA{StatePath: spath}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.ha.Handoff()
	runAt := 10.0
	h.Run, h.RunAt = old.Run(), &runAt
	h.Counters = state.Counters{Offered: 5, Served: 3, SLOMet: 3}
	if err := state.Write(spath, h); err != nil {
		t.Fatal(err)
	}
	jw := testJournal(t, jpath, 2)
	b, err := New(cfg, store, Options{Journal: jw, HA: HA{StatePath: spath, Resume: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := b.stats
	if st.Offered != 7 || st.Served != 4 || st.SLOMet != 4 || st.Refused != 1 || st.Failed != 2 ||
		st.Reasons["failed"][string(fault.RouterLost)] != 2 {
		t.Errorf("stats after resume %+v; want offered 7 = served 4 + refused 1 + failed 2 (router_lost), slo_met 4", st)
	}
	jw.Close()
	j, err := journal.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for _, rec := range j.Requests {
		if rec.Run == jw.Run() && *rec.Request.Reason == string(fault.RouterLost) {
			lost[rec.Request.RID] = true
		}
	}
	if len(lost) != 2 || !lost["lost-before"] || !lost["lost-after"] {
		t.Errorf("router_lost rows in the new run: %v; want lost-before and lost-after", lost)
	}
}
