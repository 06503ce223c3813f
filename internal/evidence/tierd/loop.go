package tierd

import (
	"context"
	"errors"
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
type Loop struct {
	Store       *store.Store
	Fleet       *fleet.Config
	JournalPath string // "" writes no serving records, tiers only
	Interval    time.Duration
	Window      time.Duration
	Clock       ports.Clock
	Log         *slog.Logger
	Publish     func(Report, error)
}

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
		if n, err := l.serving(records, ports.NewFake(now)); err != nil {
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
	engines := make([]string, 0, len(l.Fleet.Engines))
	for _, e := range l.Fleet.Engines {
		engines = append(engines, e.IID)
	}
	return Derive(Input{Store: l.Store, Records: records, Engines: engines, Model: l.Fleet.Model, AsOf: now, Releases: ix})
}

// serving writes the window's serving records; an unaccepted or missing
// request makes none (nothing consumes an unaccepted revision).
func (l *Loop) serving(records []store.Stored, clock ports.Clock) (int, error) {
	rev, err := decision.ChooseRequest(l.Store, records, l.Fleet.Model, "")
	if err != nil {
		return 0, err
	}
	req, err := decision.LoadRequest(l.Store, rev)
	if err != nil {
		return 0, err
	}
	j, err := journal.ReadFile(l.JournalPath)
	if err != nil && !errors.Is(err, journal.ErrTruncated) { // the writer may be mid-row
		return 0, fmt.Errorf("journal %s: %w", l.JournalPath, err)
	}
	engines := make([]string, 0, len(l.Fleet.Engines))
	for _, e := range l.Fleet.Engines {
		engines = append(engines, e.IID)
	}
	res, err := serving.Records(serving.Input{Journals: []*journal.Journal{j}, Engines: engines, Bindings: serving.BindingsFrom(records),
		Request: req, RequestDigest: rev, Window: l.Window, ProductionMode: true}, clock)
	if err != nil {
		return 0, err
	}
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
