package router

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/ui"
)

// router64 is a router over 64 engines (32 prefill, 32 decode) that is
// never started: building the dashboard's view needs no engine.
func router64(b *testing.B) *Router {
	cfg := fleet.Defaults()
	cfg.Model = model
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.05}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i := 0; i < 64; i++ {
		role, iid := fleet.Prefill, fmt.Sprintf("p%02d", i)
		if i >= 32 {
			role, iid = fleet.Decode, fmt.Sprintf("d%02d", i-32)
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: fmt.Sprintf("http://127.0.0.1:%d", 20000+i), Role: role})
		store.Profiles = append(store.Profiles, simengine.DefaultProfile(iid))
	}
	if err := cfg.Validate("bench"); err != nil {
		b.Fatal(err)
	}
	r, err := New(&cfg, store, Options{AdminOpen: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	return r
}

// BenchmarkDashboardRefresh64 is one refresh of the dashboard's feed at 64
// engines with five minutes of history: the state document, the view with
// its windows and chart series, the JSON and the event written. At one
// refresh a second, ns/op ÷ 10⁷ is the share of one core it costs
// (reported as %cpu@1Hz; the budget is 1).
func BenchmarkDashboardRefresh64(b *testing.B) {
	r := router64(b)
	now := time.Unix(1_800_000_000, 0)
	hub := ui.New(dashboardSource{r}, ui.Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	for i := 0; i < 300; i++ { // a full five-minute history
		hub.View()
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := json.Marshal(hub.View())
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(io.Discard, "event: view\ndata: %s\n\n", v)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "%cpu@1Hz")
}

// The feed's refresh stays under 1 % of a core at one refresh a second
// with 64 engines (with a wide margin: the race detector slows it too).
func TestDashboardRefreshUnderOnePercent(t *testing.T) {
	res := testing.Benchmark(BenchmarkDashboardRefresh64)
	if pct := float64(res.NsPerOp()) / 1e7; pct >= 1 {
		t.Errorf("one dashboard refresh at 64 engines takes %v: %.2f %% of a core at 1 Hz, budget 1 %%", time.Duration(res.NsPerOp()), pct)
	}
}
