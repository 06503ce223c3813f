package takeover

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

func row(arrived, dur float64, terminal, reason string) *journal.RequestRow {
	r := &journal.RequestRow{RID: "r", Arrived: arrived, DurationS: dur, Terminal: terminal, InputSized: true}
	if reason != "" {
		r.Reason = journal.Ptr(reason)
	}
	return r
}

var lostOutcome = Outcome{journal.TerminalFailed, string(fault.RouterLost)}

// The ledger counts exactly what a handoff taken at run_at 10 missed, and
// closes the old run's gap between offered and outcomes.
func TestLedgerCountsWhatTheHandoffMissed(t *testing.T) {
	at := 10.0
	cases := []struct {
		name     string
		counters state.Counters
		rows     []*journal.RequestRow
		lost     []journal.Admission
		runAt    *float64
		want     Late
		gap      int64
	}{
		{"a row the handoff counted adds nothing", state.Counters{Offered: 1, Served: 1},
			[]*journal.RequestRow{row(2, 2, journal.TerminalCompleted, "")}, nil, &at, Late{}, 0},
		{"a later arrival is offered and settled", state.Counters{},
			[]*journal.RequestRow{row(11, 0, journal.TerminalRefused, journal.CauseQueue)}, nil, &at,
			Late{Offered: 1, Outcomes: map[Outcome]int{{journal.TerminalRefused, journal.CauseQueue}: 1}}, 0},
		{"a request in flight at the handoff settles, SLO met", state.Counters{Offered: 1},
			[]*journal.RequestRow{row(8, 4, journal.TerminalCompleted, "")}, nil, &at,
			Late{SLOMet: 1, Outcomes: map[Outcome]int{{journal.TerminalCompleted, ""}: 1}}, 0},
		{"an unsized late row counts unsized", state.Counters{Offered: 1},
			[]*journal.RequestRow{func() *journal.RequestRow {
				r := row(8, 4, journal.TerminalInvalid, "")
				r.InputSized = false
				return r
			}()}, nil, &at,
			Late{UnsizedOffered: 1, Outcomes: map[Outcome]int{{journal.TerminalInvalid, ""}: 1}}, 0},
		{"lost requests are router_lost, the later one offered too", state.Counters{Offered: 1}, nil,
			[]journal.Admission{{RID: "a", Arrived: 9}, {RID: "b", Arrived: 13}}, &at,
			Late{Offered: 1, UnsizedOffered: 2, Outcomes: map[Outcome]int{lostOutcome: 2}}, 0},
		{"offered but never admitted closes as router_lost", state.Counters{Offered: 3, Served: 1}, nil, nil, &at,
			Late{UnsizedOffered: 2, Outcomes: map[Outcome]int{lostOutcome: 2}}, 2},
		{"without run_at the gap offers the lost arrivals", state.Counters{Offered: 1, Served: 1}, nil,
			[]journal.Admission{{RID: "a", Arrived: 5}}, nil,
			Late{Offered: 1, UnsizedOffered: 1, Outcomes: map[Outcome]int{lostOutcome: 1}}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(tc.counters, func(r *journal.RequestRow) bool { return r.Terminal == journal.TerminalCompleted })
			for _, r := range tc.rows {
				l.laterRow(r, *tc.runAt)
			}
			for _, a := range tc.lost {
				l.lost(a, tc.runAt)
			}
			gap := l.closeGap()
			if tc.want.Outcomes == nil {
				tc.want.Outcomes = map[Outcome]int{}
			}
			if !reflect.DeepEqual(l.late, tc.want) || gap != tc.gap {
				t.Errorf("late %+v gap %d, want %+v gap %d", l.late, gap, tc.want, tc.gap)
			}
		})
	}
}

func TestLateAsMetrics(t *testing.T) {
	l := Late{Offered: 2, UnsizedOffered: 1, SLOMet: 1, Outcomes: map[Outcome]int{
		{journal.TerminalCompleted, ""}: 3, {journal.TerminalCancelled, ""}: 1, {journal.TerminalInvalid, ""}: 1,
		lostOutcome: 2, {journal.TerminalExpired, "deadline"}: 1, {journal.TerminalRefused, "queue"}: 1,
		{journal.TerminalRejected, "saturated"}: 4}}
	want := metrics.Outcomes{Offered: 2, UnsizedOffered: 1, SLOMet: 1, Served: 3, Cancelled: 1, Invalid: 1,
		Failed: map[string]float64{string(fault.RouterLost): 2}, Expired: map[string]float64{"deadline": 1},
		Refused: map[string]float64{"queue": 1}, Rejected: map[string]float64{"saturated": 4}}
	if got := l.metrics(); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics %+v, want %+v", got, want)
	}
}

func openJournal(t *testing.T, path string, seed uint64) *journal.Writer {
	t.Helper()
	w, err := journal.Open(path, journal.Options{Source: "sha256:" + strings.Repeat("ab", 32),
		Clock: ports.NewFake(t0), Rng: ports.NewSeededRng(seed)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// After a takeover the old run's admitted requests without a terminal row
// get router_lost rows in this run, but only once the request timeout has
// passed: a fenced primary may still be finishing them.
func TestTakeoverClosesLostRequestsAfterTheRequestTimeout(t *testing.T) {
	jpath := filepath.Join(t.TempDir(), "journal.jsonl")
	old := openJournal(t, jpath, 1)
	rt := newFakeRouter(t)
	a := newTestHA(t, rt, func(c *Config) { c.Journal = old })
	a.Admitted(journal.Admission{RID: "done", Arrived: 2})
	a.Admitted(journal.Admission{RID: "lost", Arrived: 9})
	done := row(2, 1, journal.TerminalCompleted, "")
	done.RID = "done"
	if err := old.Request(done); err != nil {
		t.Fatal(err)
	}
	old.Close()
	runAt := 10.0
	doc := &state.Handoff{Run: old.Run(), RunAt: &runAt, Counters: state.Counters{Offered: 2, Served: 1}}

	clk := ports.NewFake(t0)
	jw := openJournal(t, jpath, 2)
	rt.now = 42
	b := newTestHA(t, rt, func(c *Config) { c.Journal, c.Clock = jw, clk })
	b.closeLost(doc, 31*time.Second)
	eventually(t, "the delayed reconcile to wait", func() bool { return clk.Pending() == 1 })
	rt.mu.Lock()
	early := len(rt.late)
	rt.mu.Unlock()
	if early != 0 {
		t.Fatal("reconciled before the request timeout passed")
	}
	clk.Advance(31 * time.Second)
	eventually(t, "the reconcile", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.late) == 1 })
	if want := (Late{UnsizedOffered: 1, Outcomes: map[Outcome]int{lostOutcome: 1}}); !reflect.DeepEqual(rt.late[0], want) {
		t.Errorf("late %+v, want %+v", rt.late[0], want)
	}
	jw.Close()
	j, err := journal.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, rec := range j.Requests {
		if rec.Run == jw.Run() {
			if rec.Request.Arrived != 42 || !strings.Contains(*rec.Request.Error, "admitted at 9.000s") {
				t.Errorf("router_lost row %+v: want arrived at this run's 42 s and the old admission time", rec.Request)
			}
			lost = append(lost, rec.Request.RID+" "+*rec.Request.Reason)
		}
	}
	if !reflect.DeepEqual(lost, []string{"lost router_lost"}) {
		t.Errorf("rows in the new run %v, want one router_lost row for lost", lost)
	}
}

// The router's own run is never reconciled against itself.
func TestCloseLostSkipsItsOwnRun(t *testing.T) {
	jw := openJournal(t, filepath.Join(t.TempDir(), "journal.jsonl"), 1)
	rt := newFakeRouter(t)
	h := newTestHA(t, rt, func(c *Config) { c.Journal = jw })
	h.closeLost(&state.Handoff{Run: jw.Run(), Counters: state.Counters{Offered: 3}}, 0)
	h.closeLost(&state.Handoff{Counters: state.Counters{Offered: 3}}, 0)
	if len(rt.late) != 0 {
		t.Errorf("reconciled %+v, want nothing for its own run or a document without one", rt.late)
	}
}
