package takeover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/state"
)

// Router crash accounting. Every admitted request has an admission
// record in the journal before any engine works on it. A router killed
// mid-request leaves records without terminal rows; the router that
// carries on from its handoff document closes each with a terminal row
// of reason router_lost and brings the counters it restored up to date
// with what the old run journalled after its last handoff, so that
// offered equals the sum of outcomes again.

// Admitted writes a request's admission record. A journal that cannot
// take it is logged; the request is still served, as it is when its
// terminal row cannot be written. The run's first admission first writes
// the handoff document naming the run, so that a router killed the
// moment after it admitted leaves a document that sends its successor to
// this run's records, not to the run before.
func (h *HA) Admitted(a journal.Admission) {
	if h.cfg.Journal == nil {
		return
	}
	if h.cfg.StatePath != "" && !h.named.Load() {
		if err := h.writer.Flush(); err != nil {
			h.cfg.Log.Error("the handoff document does not name this run yet; a crash now leaves its admitted requests unclosed",
				"rid", a.RID, "err", err)
		}
	}
	if err := h.cfg.Journal.Admitted(a); err != nil {
		h.cfg.Log.Error("journal write failed; the request's admission record is lost", "rid", a.RID, "err", err)
	}
}

// Late is what the old run journalled after its handoff was taken, to
// add to the router's counters.
type Late struct {
	Offered, UnsizedOffered, SLOMet int
	Outcomes                        map[Outcome]int // settled requests by terminal and reason
}

// AddTo adds the late outcomes to the router's counters c; the caller
// holds whatever guards c.
func (l Late) AddTo(c *routerdoc.Counts) {
	c.Offered += l.Offered
	c.UnsizedOffered += l.UnsizedOffered
	c.SLOMet += l.SLOMet
	for o, n := range l.Outcomes {
		for range n {
			c.Count(o.Terminal, o.Reason)
		}
	}
}

// Outcome is a terminal and its reason ("" when it has none).
type Outcome struct{ Terminal, Reason string }

// closeLost closes the old run's lost requests after wait: zero on
// resume (the old process is gone), the request timeout on takeover (a
// fenced primary may still be finishing its requests, and all of them
// end by their deadline) unless the primary's address refuses
// connections: nothing listens there, so nothing is still finishing.
func (h *HA) closeLost(doc *state.Handoff, wait time.Duration) {
	if doc.Run == "" || (h.cfg.Journal != nil && doc.Run == h.cfg.Journal.Run()) {
		return
	}
	if wait <= 0 {
		h.reconcile(doc)
		return
	}
	h.rt.Background(func(ctx context.Context) {
		if h.cfg.StandbyOf != "" && gone(ctx, h.cfg.StandbyOf) {
			h.cfg.Log.Info("the old primary's address refuses connections: closing its requests now", "primary", h.cfg.StandbyOf)
			h.reconcile(doc)
			return
		}
		select {
		case <-h.cfg.Clock.After(wait):
			h.reconcile(doc)
		case <-ctx.Done():
		}
	})
}

// gone says the router at base is not running: its port refuses a
// connection (the host answers, no process listens). A timeout or any
// other error proves nothing (a partitioned primary may still be
// finishing its requests), and neither does an answer. A primary shutting
// down gracefully keeps its lease until its requests have ended, so a
// standby cannot be taking over while one closed its listener early.
func gone(ctx context.Context, base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return false
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// reconcile reads the old run from the journal, counts what it recorded
// after the handoff doc was taken, writes a router_lost row for each
// admitted request without a terminal row, and closes any remaining gap
// between doc's offered count and its outcomes in the counters.
func (h *HA) reconcile(doc *state.Handoff) {
	tail := h.oldRun(doc.Run)
	var lost []journal.Admission
	if tail != nil {
		lost = tail.Lost()
	}
	acc := newLedger(doc.Counters, h.rt.SLOMet)
	if tail != nil && doc.RunAt != nil {
		for _, row := range tail.Rows {
			acc.laterRow(row, *doc.RunAt)
		}
	}
	now := h.rt.Now()
	rows := make([]*journal.RequestRow, len(lost))
	for i, a := range lost {
		acc.lost(a, doc.RunAt)
		rows[i] = lostRow(a, doc.Run, now)
	}
	unrecorded := acc.closeGap()
	h.rt.AddLate(acc.late)
	h.cfg.Metrics.Restore(acc.late.metrics())
	for _, row := range rows {
		if err := h.cfg.Journal.Request(row); err != nil {
			h.cfg.Log.Error("journal write failed; a lost request's terminal row is missing", "rid", row.RID, "err", err)
		}
	}
	if len(lost) > 0 || unrecorded != 0 {
		h.cfg.Log.Warn("closed the requests the previous router lost", "run", doc.Run, "router_lost_rows", len(lost),
			"closed_in_counters_only", unrecorded)
	}
}

// oldRun reads run's rows from this router's journal file, or nil when
// there is none or it cannot be read.
func (h *HA) oldRun(run string) *journal.RunTail {
	j := h.cfg.Journal
	if j == nil || j.Path() == "" {
		return nil
	}
	tail, err := journal.ScanRun(j.Path(), run)
	if err != nil {
		h.cfg.Log.Warn("cannot read the old run from the journal; its in-flight requests are closed in the counters only",
			"run", run, "err", err)
		return nil
	}
	if tail.Damaged > 0 {
		h.cfg.Log.Warn("the old run's journal has torn rows; they were skipped", "run", run,
			"rows", tail.Damaged, "first_line", tail.FirstDamaged)
	}
	return tail
}

// lostRow is the terminal row of a request the old run lost. Its
// arrived is this run's time of closing: the old run's clock does not
// compare with this one's.
func lostRow(a journal.Admission, run string, now float64) *journal.RequestRow {
	return &journal.RequestRow{RID: a.RID, ClientRID: a.ClientRID, ClientRIDBytes: a.ClientRIDBytes, Arrived: now, Terminal: journal.TerminalFailed,
		Reason: journal.Ptr(string(fault.RouterLost)),
		Error: journal.Ptr(fmt.Sprintf("the router of journal run %s stopped before this request ended (admitted at %.3fs of that run)",
			run, a.Arrived))}
}

// ledger tallies the old run's late outcomes for the router's counters,
// keeping its own count of the old run's offered and settled requests
// so the gap it closes is the old run's alone.
type ledger struct {
	offered, outcomes int64
	late              Late
	sloMet            func(*journal.RequestRow) bool
}

func newLedger(c state.Counters, sloMet func(*journal.RequestRow) bool) *ledger {
	return &ledger{offered: c.Offered, sloMet: sloMet,
		outcomes: c.Served + c.Failed + c.Expired + c.Cancelled + c.InvalidRequests + c.Refused + c.Rejected,
		late:     Late{Outcomes: map[Outcome]int{}}}
}

// laterRow counts a terminal row of the old run that the handoff taken
// at runAt did not: it arrived after (offered) or ended after (outcome).
// The old router read run_at under its lock with the counters it moved,
// so the comparison is exact.
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
	if l.sloMet(row) {
		l.late.SLOMet++
	}
}

// lost counts a lost request: its outcome now, its offer too when it
// arrived after the handoff (or when the handoff does not say when it
// was taken, closeGap evens the count).
func (l *ledger) lost(a journal.Admission, runAt *float64) {
	if runAt != nil && a.Arrived > *runAt {
		l.offer()
	}
	l.settle(journal.TerminalFailed, string(fault.RouterLost), true)
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
			l.settle(journal.TerminalFailed, string(fault.RouterLost), true)
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
	l.late.Offered++
}

func (l *ledger) settle(terminal, reason string, unsized bool) {
	l.outcomes++
	l.late.Outcomes[Outcome{terminal, reason}]++
	if unsized {
		l.late.UnsizedOffered++
	}
}

// metrics is l as metric deltas.
func (l Late) metrics() metrics.Outcomes {
	d := metrics.Outcomes{Offered: float64(l.Offered), UnsizedOffered: float64(l.UnsizedOffered), SLOMet: float64(l.SLOMet),
		Failed: map[string]float64{}, Expired: map[string]float64{}, Refused: map[string]float64{}, Rejected: map[string]float64{}}
	for o, n := range l.Outcomes {
		v := float64(n)
		switch o.Terminal {
		case journal.TerminalCompleted:
			d.Served += v
		case journal.TerminalCancelled:
			d.Cancelled += v
		case journal.TerminalInvalid:
			d.Invalid += v
		case journal.TerminalFailed:
			d.Failed[o.Reason] += v
		case journal.TerminalExpired:
			d.Expired[o.Reason] += v
		case journal.TerminalRefused:
			d.Refused[o.Reason] += v
		case journal.TerminalRejected:
			d.Rejected[o.Reason] += v
		}
	}
	return d
}
