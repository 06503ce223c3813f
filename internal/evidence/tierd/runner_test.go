package tierd

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

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
