package router

import (
	"context"
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/state"
)

// Router crash accounting. Every admitted request has an admission
// record in the journal before any engine works on it. A router killed
// mid-request leaves records without terminal rows; the router that
// carries on from its handoff document closes each with a terminal row
// of reason router_lost and brings the counters it restored up to date
// with what the old run journalled after its last handoff, so that
// offered equals the sum of outcomes again.

// recordAdmission writes the call's admission record. A journal that
// cannot take it is logged; the request is still served, as it is when
// its terminal row cannot be written.
func (c *call) recordAdmission() {
	r := c.r
	if r.journal == nil {
		return
	}
	err := r.journal.Admitted(journal.Admission{RID: c.rid, ClientRID: c.clientRID, Arrived: c.arrived, Endpoint: c.endpoint})
	if err != nil {
		r.log.Error("journal write failed; the request's admission record is lost", "rid", c.rid, "err", err)
	}
}

// closeLost closes the old run's lost requests after wait: zero on
// resume (the old process is gone), the request timeout on takeover (a
// fenced primary may still be finishing its requests, and all of them
// end by their deadline).
func (r *Router) closeLost(h *state.Handoff, wait time.Duration) {
	if h.Run == "" || (r.journal != nil && h.Run == r.journal.Run()) {
		return
	}
	if wait <= 0 {
		r.reconcile(h)
		return
	}
	r.background(func(ctx context.Context) {
		select {
		case <-r.clock.After(wait):
			r.reconcile(h)
		case <-ctx.Done():
		}
	})
}

// reconcile reads the old run from the journal, counts what it recorded
// after the handoff h was taken, writes a router_lost row for each
// admitted request without a terminal row, and closes any remaining gap
// between h's offered count and its outcomes in the counters.
func (r *Router) reconcile(h *state.Handoff) {
	var tail *journal.RunTail
	if r.journal != nil && r.journal.Path() != "" {
		t, err := journal.ScanRun(r.journal.Path(), h.Run)
		if err != nil {
			r.log.Warn("cannot read the old run from the journal; its in-flight requests are closed in the counters only",
				"run", h.Run, "err", err)
		} else {
			tail = t
		}
	}
	var lost []journal.Admission
	if tail != nil {
		lost = tail.Lost()
		if tail.Damaged > 0 {
			r.log.Warn("the old run's journal has torn rows; they were skipped", "run", h.Run,
				"rows", tail.Damaged, "first_line", tail.FirstDamaged)
		}
	}
	rows := make([]*journal.RequestRow, len(lost))
	r.mu.Lock()
	now := r.now()
	acc := newLedger(h, r)
	if tail != nil && h.RunAt != nil {
		for _, row := range tail.Rows {
			acc.laterRow(row, *h.RunAt)
		}
	}
	for i, a := range lost {
		acc.lost(a, h.RunAt)
		rows[i] = lostRow(a, h.Run, now)
	}
	unrecorded := acc.closeGap()
	r.mu.Unlock()
	r.metrics.Restore(acc.delta)
	for _, row := range rows {
		if err := r.journal.Request(row); err != nil {
			r.log.Error("journal write failed; a lost request's terminal row is missing", "rid", row.RID, "err", err)
		}
	}
	if len(lost) > 0 || unrecorded != 0 {
		r.log.Warn("closed the requests the previous router lost", "run", h.Run, "router_lost_rows", len(lost),
			"closed_in_counters_only", unrecorded)
	}
}

// lostRow is the terminal row of a request the old run lost. Its
// arrived is this run's time of closing: the old run's clock does not
// compare with this one's.
func lostRow(a journal.Admission, run string, now float64) *journal.RequestRow {
	return &journal.RequestRow{RID: a.RID, ClientRID: a.ClientRID, Arrived: now, Terminal: journal.TerminalFailed,
		Reason: journal.Ptr(journal.ReasonRouterLost),
		Error: journal.Ptr(fmt.Sprintf("the router of journal run %s stopped before this request ended (admitted at %.3fs of that run)",
			run, a.Arrived))}
}

// ledger adds the old run's late outcomes to the router's stats and the
// matching metric deltas, keeping its own tally of the old run's offered
// and settled requests so the gap it closes is the old run's alone.
// Used with Router.mu held.
type ledger struct {
	r                 *Router
	offered, outcomes int64
	delta             metrics.Outcomes
}

func newLedger(h *state.Handoff, r *Router) *ledger {
	c := h.Counters
	return &ledger{r: r, offered: c.Offered,
		outcomes: c.Served + c.Failed + c.Expired + c.Cancelled + c.InvalidRequests + c.Refused + c.Rejected,
		delta: metrics.Outcomes{Failed: map[string]float64{}, Expired: map[string]float64{},
			Refused: map[string]float64{}, Rejected: map[string]float64{}}}
}

// laterRow counts a terminal row of the old run that the handoff taken
// at runAt did not: it arrived after (offered) or ended after (outcome).
// Both are read under Router.mu with the counters they move, so the
// comparison is exact.
func (l *ledger) laterRow(row *journal.RequestRow, runAt float64) {
	if row.Arrived > runAt {
		l.offer()
	}
	if row.Arrived+row.DurationS <= runAt {
		return
	}
	reason := ""
	if row.Reason != nil {
		reason = *row.Reason
	}
	l.settle(row.Terminal, reason, !row.InputSized)
	if l.r.sloMet(row) {
		l.r.stats.sloMet++
		l.delta.SLOMet++
	}
}

// lost counts a lost request: its outcome now, its offer too when it
// arrived after the handoff (or when the handoff does not say when it
// was taken, closeGap evens the count).
func (l *ledger) lost(a journal.Admission, runAt *float64) {
	if runAt != nil && a.Arrived > *runAt {
		l.offer()
	}
	l.settle(journal.TerminalFailed, journal.ReasonRouterLost, true)
}

// closeGap makes the old run's offered equal its outcomes: requests that
// were offered but never admitted (still sending their bodies at the
// kill) are counted router_lost; with a handoff from before run_at
// existed, lost requests that arrived after it are counted offered.
func (l *ledger) closeGap() int64 {
	gap := l.offered - l.outcomes
	switch {
	case gap > 0:
		for range gap {
			l.settle(journal.TerminalFailed, journal.ReasonRouterLost, true)
		}
	case gap < 0:
		for range -gap {
			l.offer()
		}
	}
	return gap
}

func (l *ledger) offer() {
	l.offered++
	l.r.stats.offered++
	l.delta.Offered++
}

func (l *ledger) settle(terminal, reason string, unsized bool) {
	l.outcomes++
	l.r.stats.count(terminal, reason)
	if unsized {
		l.r.stats.unsizedOffered++
		l.delta.UnsizedOffered++
	}
	switch terminal {
	case journal.TerminalCompleted:
		l.delta.Served++
	case journal.TerminalCancelled:
		l.delta.Cancelled++
	case journal.TerminalInvalid:
		l.delta.Invalid++
	case journal.TerminalFailed:
		l.delta.Failed[reason]++
	case journal.TerminalExpired:
		l.delta.Expired[reason]++
	case journal.TerminalRefused:
		l.delta.Refused[reason]++
	case journal.TerminalRejected:
		l.delta.Rejected[reason]++
	}
}
