package tierd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/serving"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Loop is the router's evidence pass: on every interval it writes serving
// records from the journal's last Window (against the newest accepted
// DecisionRequest) and re-derives every endpoint's tier for Publish.
//
// It reads the journal incrementally: a journal.Tail delivers only the
// rows appended since the last pass, every file of a rotated set, into a
// serving.Window that keeps the window's rows and nothing older. A pass
// costs the new rows plus the window's, however long the journal is.
type Loop struct {
	Store       *store.Store
	Fleet       *fleet.Config
	JournalPath string // "" writes no serving records, tiers only
	Interval    time.Duration
	Window      time.Duration
	Clock       ports.Clock
	Log         *slog.Logger
	Publish     func(Report, error)

	tail *journal.Tail   // nil until the first pass
	win  *serving.Window // the journal's rows in the window
	read JournalRead     // what the passes read
	// judged is the request revision and store size the window was last
	// judged against: with no new row and neither changed, a pass makes
	// no serving record.
	judged string
}

// JournalRead is what the evidence pass has read of the journal, for
// /narwhal/state.evidence.
type JournalRead struct {
	Torn       journal.Torn     // torn rows skipped, every pass
	Pass       journal.TailRead // the last pass's read
	WindowRows int              // rows the window holds
	Error      string           // why the last pass made no serving records ("" when it did or had nothing new)
}

// JournalState is what the passes read of the journal so far.
func (l *Loop) JournalState() JournalRead { return l.read }

// Run passes once now, then every Interval until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	t := l.Clock.NewTicker(l.Interval)
	defer t.Stop()
	for {
		l.Publish(l.Pass())
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Pass is one evidence pass.
func (l *Loop) Pass() (Report, error) {
	now := l.Clock.Now()
	records, err := l.Store.Records()
	if err != nil {
		return Report{}, err
	}
	if l.JournalPath != "" {
		n, err := l.serving(records, ports.NewFake(now))
		l.read.Error = ""
		if err != nil {
			l.read.Error = err.Error()
			l.Log.Warn("evidence: no serving records this pass", "err", err)
		} else if n > 0 {
			if records, err = l.Store.Records(); err != nil {
				return Report{}, err
			}
		}
	}
	raw, err := l.Store.ReadReleaseIndex()
	if err != nil {
		return Report{}, err
	}
	ix, err := vllmrel.Load(raw)
	if err != nil {
		return Report{}, err
	}
	advs, err := l.Store.Advisories()
	if err != nil {
		return Report{}, err
	}
	return Derive(Input{Store: l.Store, Records: records, Engines: l.engines(), Model: l.Fleet.Model, AsOf: now, Releases: ix, Advisories: advs})
}

// serving reads the journal's new rows into the window and writes the
// window's serving records; an unaccepted or missing request makes none
// (nothing consumes an unaccepted revision).
func (l *Loop) serving(records []store.Stored, clock ports.Clock) (int, error) {
	if l.tail == nil {
		l.tail, l.win = journal.NewTail(l.JournalPath), serving.NewWallWindow(l.engines(), l.Window)
	}
	read, err := l.tail.Read(func(b *journal.Brief) error { l.win.Brief(b); return nil })
	l.read.Torn, l.read.Pass, l.read.WindowRows = l.tail.Torn(), read, l.win.Rows()
	if err != nil {
		return 0, fmt.Errorf("journal %s: %w", l.JournalPath, err)
	}
	rev, err := decision.ChooseRequest(l.Store, records, l.Fleet.Model, "")
	if err != nil {
		return 0, err
	}
	judged := fmt.Sprintf("%s/%d", rev, len(records))
	if read.Rows == 0 && judged == l.judged {
		return 0, nil // the same window against the same evidence: nothing new to say
	}
	req, err := decision.LoadRequest(l.Store, rev)
	if err != nil {
		return 0, err
	}
	res, err := serving.Records(serving.Input{Windows: []*serving.Window{l.win}, Bindings: serving.BindingsFrom(records),
		Request: req, RequestDigest: rev, ProductionMode: true}, clock)
	if err != nil {
		return 0, err
	}
	l.judged = judged
	seen := map[string]bool{}
	for _, s := range records {
		seen[s.Record.Subject[evidence.SubjectWindow]] = true
	}
	n := 0
	for _, r := range res.Records {
		if seen[r.Subject[evidence.SubjectWindow]] {
			continue // the same window again (no new traffic): one record is enough
		}
		if _, err := l.Store.PutRecord(r); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (l *Loop) engines() []string {
	out := make([]string, 0, len(l.Fleet.Engines))
	for _, e := range l.Fleet.Engines {
		out = append(out, e.IID)
	}
	return out
}
