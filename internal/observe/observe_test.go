package observe

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/devfleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// make observe against make run's fleet: Prometheus reports the router
// target up, a narwhal_ query returns data, and killing an engine fires
// NarwhalEngineDown for it. Short scrape and evaluation cycles (and a 1 s
// for:) keep it to seconds.
func TestObserveAgainstTheDevFleet(t *testing.T) {
	prom := testkit.Tool(t, "prometheus", "Debian package prometheus: make tools, or apt-get install -y prometheus")
	base, dir, engines := devFleet(t)
	for i := 0; i < 2; i++ {
		resp, err := http.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"narwhal/sim-llama-3-8b","prompt":"observe me","max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	o := Options{RouterURL: base, Listen: testkit.FreeAddr(t), Fleet: filepath.Join(dir, "fleet.json"), Dir: t.TempDir(),
		Deploy: "../../deploy/observability", Prometheus: prom, ScrapeInterval: "250ms", EvalInterval: "250ms", AlertFor: "1s"}
	promURL := runObserve(t, o)
	within(t, 20*time.Second, "the router target up", func() bool {
		return query(t, promURL, `up{job="narwhal-router"}`) == "1"
	})
	within(t, 10*time.Second, "narwhal_served_total at 2", func() bool {
		return query(t, promURL, `narwhal_served_total{job="narwhal-router"}`) == "2"
	})
	within(t, 10*time.Second, "the engine targets up", func() bool {
		return query(t, promURL, `count(up{job="engines"} == 1)`) == "4"
	})
	engines.Engines[3].Close() // d1
	within(t, 25*time.Second, "NarwhalEngineDown firing for d1", func() bool { return firing(t, promURL, "NarwhalEngineDown", "d1") })
}

func devFleet(t *testing.T) (string, string, *simengine.Fleet) {
	var engines *simengine.Fleet
	dir := t.TempDir()
	run, err := devfleet.Start(devfleet.Options{Dir: dir, OnEngines: func(f *simengine.Fleet) { engines = f }}, &testkit.SyncBuffer{})
	if err != nil {
		t.Fatalf("dev fleet: %v", err)
	}
	t.Cleanup(func() { run.Stop() })
	return run.Base, dir, engines
}

// runObserve runs make observe's Run until the test ends and returns
// Prometheus's URL once ready; Run must then stop cleanly.
func runObserve(t *testing.T, o Options) string {
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	o.Ready = func(u string) { ready <- u }
	out := &testkit.SyncBuffer{}
	go func() { done <- Run(ctx, o, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("observe did not stop cleanly: %v", err)
		}
	})
	select {
	case u := <-ready:
		testkit.Mentions(t, "the banner", out.String(), "Prometheus ready at "+u, "/narwhal/ui", "compose.yaml")
		return u
	case err := <-done:
		t.Fatalf("observe: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Prometheus not ready in 30 s")
	}
	return ""
}

func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("no %s within %v", what, limit)
}

// query is the first sample's value of an instant query, "" without one.
func query(t *testing.T, promURL, q string) string {
	v, _ := testkit.PromQuery(promURL, q)
	return v
}

func firing(t *testing.T, promURL, alert, iid string) bool {
	var out struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if !getJSON(promURL+"/api/v1/alerts", &out) {
		return false
	}
	for _, a := range out.Data.Alerts {
		if a.Labels["alertname"] == alert && a.Labels["iid"] == iid && a.State == "firing" {
			return true
		}
	}
	return false
}

func getJSON(u string, v any) bool {
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(v) == nil
}

// A router URL with a path, credentials or no port is refused, naming
// the variable.
func TestRouterURLMustBeAnOrigin(t *testing.T) {
	for _, raw := range []string{"http://127.0.0.1", "https://127.0.0.1:8000", "http://u:p@127.0.0.1:8000", "http://127.0.0.1:8000/v1", "127.0.0.1:8000"} {
		if _, err := authority("NARWHAL_ROUTER_URL", raw); err == nil || !strings.Contains(err.Error(), "NARWHAL_ROUTER_URL") {
			t.Errorf("%q: %v, want a refusal naming NARWHAL_ROUTER_URL", raw, err)
		}
	}
	if a, err := authority("x", "http://[::1]:8000/"); err != nil || a != "[::1]:8000" {
		t.Errorf("IPv6 origin: %q %v", a, err)
	}
	o := FromEnv(func(string) (string, bool) { return "", false })
	if o.RouterURL != DefaultRouterURL || o.Listen != "127.0.0.1:9090" {
		t.Errorf("defaults %+v", o)
	}
}
