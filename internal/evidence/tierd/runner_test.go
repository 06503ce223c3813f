package tierd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// A Runner without a store never runs and says so; a failed pass keeps
// the previous tiers and records why, and the gauge hears each tier once.
func TestRunnerPublishes(t *testing.T) {
	clock := ports.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	set := map[string]string{}
	h := Host{Clock: clock, Log: slog.New(slog.DiscardHandler), SetTier: func(iid, tier string) { set[iid] = tier }}
	off := NewRunner(Options{}, h)
	done := make(chan struct{})
	go func() { off.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a disabled runner did not return")
	}
	if st := off.State(); st.Enabled || len(st.Endpoints) != 0 {
		t.Fatalf("disabled runner state %+v", st)
	}
	r := NewRunner(Options{Store: "x"}, h)
	if r.o.Interval != time.Minute || r.o.Window != 10*time.Minute {
		t.Fatalf("defaults %+v", r.o)
	}
	r.publish(Report{Endpoints: []Endpoint{{Engine: "p0", Endpoint: "fp0", Tier: "lab"}}}, JournalRead{}, nil)
	r.publish(Report{}, JournalRead{}, errors.New("store unreadable"))
	st := r.State()
	if !st.Enabled || st.Error != "store unreadable" || st.Endpoints["p0"].Tier != "lab" || st.UpdatedAt != "2026-01-02T03:04:05Z" {
		t.Fatalf("state after a failed pass %+v", st)
	}
	if set["p0"] != "lab" {
		t.Fatalf("gauge %v", set)
	}
}

// /narwhal/state.evidence.journal says what the pass read: the torn
// rows it skipped and why it wrote no serving record.
func TestRunnerStateSaysWhatTheJournalPassRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.jsonl")
	jw, err := journal.Open(path, journal.Options{Source: "sha256:" + strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	jw.Request(&journal.RequestRow{RID: "a", InputLen: 1, Terminal: journal.TerminalCompleted})
	jw.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"schema":"narwhal.journal","sch` + "\n")
	f.Close()
	h := Host{Fleet: &fleet.Config{Model: "m", Engines: []fleet.Engine{{IID: "p0"}}}, JournalPath: path, Clock: ports.NewFake(time.Unix(0, 0)),
		Log: slog.New(slog.DiscardHandler), SetTier: func(string, string) {}}
	r := NewRunner(Options{Store: filepath.Join(dir, "store"), Interval: time.Hour}, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.State().Journal == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	j := r.State().Journal
	if j == nil || j.TornRows != 1 || j.FirstTorn != path+":3" || j.PassRows != 2 || !strings.Contains(j.ServingError, "DecisionRequest") {
		t.Fatalf("state.evidence.journal %+v; want 1 torn row at %s:3, 2 rows read, and no accepted request said", j, path)
	}
}
