package tierd

import (
	"fmt"
	"log/slog"
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
