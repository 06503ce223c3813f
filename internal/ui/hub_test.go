package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// fakeSource is a router of two engines that served n requests, all
// within the SLO, with one flip decided by the reactive controller.
type fakeSource struct{ n int }

func (f *fakeSource) Snapshot() Snapshot {
	f.n += 10
	st := routerdoc.StateDoc{Served: f.n, SLOMet: f.n, Offered: f.n,
		Engines: []routerdoc.Engine{{IID: "p0", Role: fleet.Prefill, Live: true}, {IID: "d0", Role: fleet.Decode, Live: true, ResidentDecode: 2}},
		Pools:   routerdoc.PhasePair[[]string]{Prefill: []string{"p0"}, Decode: []string{"d0"}},
		Load:    routerdoc.PhasePair[float64]{Prefill: 0.4, Decode: 0.9},
		Ejected: []string{}, Draining: []string{"d0"},
		Flips:          []routerdoc.Flip{{At: 3, IID: "d0", To: fleet.Decode, By: "reactive"}},
		Control:        routerdoc.ControlSummary{LastDecision: &routerdoc.Decision{At: 3, Reason: "decode pressure", Flip: &routerdoc.Flip{At: 3, IID: "d0"}}},
		OutcomeReasons: map[string]map[string]int{"refused": {"queue": 2, "tpot": 0}},
	}
	h := metrics.Histogram{Bounds: []float64{0.5, 1}, Counts: []uint64{uint64(f.n), uint64(f.n)}, Count: uint64(f.n)}
	return Snapshot{State: st, TTFT: h, TPOT: h, Lifecycle: map[string]string{"d0": "draining"},
		Failures: []*journal.RequestRow{{RID: "r9", Terminal: journal.TerminalRefused, Reason: journal.Ptr("queue"), TraceID: journal.Ptr("ab")}}}
}

// A view carries every section the page draws, with the windows taken
// over the sampled history.
func TestViewSections(t *testing.T) {
	now := time.Unix(1000, 0)
	h := New(&fakeSource{}, Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	for i := 0; i < 5; i++ {
		h.View()
	}
	v := h.View()
	if len(v.Engines) != 2 || v.Engines[1].Status != "draining" || v.Engines[1].Lifecycle != "draining" || v.Engines[1].Decode != 2 {
		t.Errorf("engines %+v", v.Engines)
	}
	if v.Pools.Prefill != 1 || v.Pools.DecodeLoad != 0.9 {
		t.Errorf("pools %+v", v.Pools)
	}
	if v.Last1m.Goodput != 10 || v.Last1m.Attainment == nil || *v.Last1m.Attainment != 1 || v.Last1m.TTFT.P95 == nil {
		t.Errorf("last minute %+v", v.Last1m)
	}
	if len(v.Flips) != 1 || v.Flips[0].Reason != "decode pressure" {
		t.Errorf("flips %+v, want the decision's reason", v.Flips)
	}
	if len(v.Drops) != 1 || v.Drops[0] != (Drop{Terminal: "refused", Cause: "queue", Count: 2}) {
		t.Errorf("drops %+v, want the non-zero cause only", v.Drops)
	}
	if len(v.Failures) != 1 || v.Failures[0].TraceID != "ab" || v.Failures[0].Reason != "queue" {
		t.Errorf("failures %+v", v.Failures)
	}
}

// The feed sends a view at once and every refresh, and ends when the hub
// closes (a router shutting down).
func TestFeedEndsOnClose(t *testing.T) {
	h := New(&fakeSource{}, Options{Refresh: 50 * time.Millisecond})
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+Path+"/feed", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	views := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var v View
		if err := json.Unmarshal([]byte(line[6:]), &v); err != nil {
			t.Fatalf("event data: %v", err)
		}
		if views++; views == 3 {
			h.Close()
		}
	}
	if ctx.Err() != nil || views < 3 {
		t.Errorf("feed sent %d views and ended by %v; want it to end on Close", views, ctx.Err())
	}
}

// Asset paths the embedded file system cannot hold are 404s, not the
// file server's 500; real assets are served.
func TestAssetPaths(t *testing.T) {
	h := New(&fakeSource{}, Options{Refresh: time.Hour})
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		status int
	}{
		{Path + "/app.js", 200},
		{Path + "/%c0%ae", 404},
		{Path + "/%c0%ae%c0%ae/app.js", 404},
		{Path + "/nope.js", 404},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
}
