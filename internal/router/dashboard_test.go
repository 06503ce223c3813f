package router

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/ui"
)

// A client's traceparent reaches both legs and the journal row; without
// one the router starts a trace and uses it the same way.
func TestTraceparentReachesBothLegsAndTheJournal(t *testing.T) {
	var lc *legCounter
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, func(c *fleet.Config) { lc = countLegs(t, c) })
	defer h.close()
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, sent := range []string{client, ""} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/completions",
			strings.NewReader(`{"model":"sim-model","prompt":"trace me","max_tokens":3}`))
		req.Header.Set("Content-Type", "application/json")
		if sent != "" {
			req.Header.Set("Traceparent", sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h.noteRID(resp)
		row := h.row(resp.Header.Get("X-Narwhal-Request-Id"))
		legs := lc.takeTraces()
		if row.TraceID == nil || len(*row.TraceID) != 32 || len(legs) != 2 {
			t.Fatalf("sent %q: row trace_id %v, %d legs", sent, row.TraceID, len(legs))
		}
		if sent != "" && *row.TraceID != sent[3:35] {
			t.Errorf("row trace_id %s, want the client's %s", *row.TraceID, sent[3:35])
		}
		for i, tp := range legs {
			if !strings.HasPrefix(tp, "00-"+*row.TraceID+"-") {
				t.Errorf("sent %q: leg %d carried traceparent %q, want trace %s", sent, i, tp, *row.TraceID)
			}
		}
	}
}

// GET / sends a browser to the dashboard; the page, its assets, a view and
// the feed are served, and the view lists every engine with its role.
func TestDashboardRoutes(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode}, nil)
	defer h.close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != ui.Path {
		t.Errorf("GET /: %d Location %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), ui.Path)
	}
	resp, body := testkit.Get(t, h.srv.URL+ui.Path)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "/narwhal/ui/app.js") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("page: %s CSP %q", resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
	}
	if resp, _ := testkit.Get(t, h.srv.URL+ui.Path+"/app.js"); !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js served as %q", resp.Header.Get("Content-Type"))
	}
	_, body = testkit.Get(t, h.srv.URL+ui.Path+"/view.json")
	var v ui.View
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("view.json: %v: %s", err, body)
	}
	roles := map[string]string{}
	for _, e := range v.Engines {
		roles[e.IID] = e.Role
	}
	if len(roles) != 3 || roles["p0"] != "prefill" || roles["d1"] != "decode" || v.Pools.Decode != 2 || v.SLO.TTFTS != 2 {
		t.Errorf("view engines %v pools %+v slo %+v", roles, v.Pools, v.SLO)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+ui.Path+"/feed", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			if err := json.Unmarshal([]byte(line[6:]), &v); err != nil || len(v.Engines) != 3 {
				t.Errorf("feed event: %v, %d engines", err, len(v.Engines))
			}
			return
		}
	}
	t.Fatalf("feed (%s) sent no view: %v", resp.Header.Get("Content-Type"), sc.Err())
}
