package simengine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func status(t *testing.T, method, url, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, _ := testkit.Do(t, req)
	return resp.StatusCode
}

// Like vllm serve --api-key: /v1 needs the key, /health, /version,
// /metrics and /tokenize do not; SetAPIKey is a relaunch with another key.
func TestAPIKeyRoutesAndRelaunch(t *testing.T) {
	e := startEngine(t, func(c *Config) { c.APIKey = "one" })
	completion := `{"model":"sim-model","prompt":"hi","max_tokens":1}`
	cases := []struct {
		method, path, key, body string
		want                    int
	}{
		{"POST", "/v1/completions", "", completion, 401},
		{"POST", "/v1/completions", "two", completion, 401},
		{"POST", "/v1/completions", "one", completion, 200},
		{"POST", "/tokenize", "", `{"model":"sim-model","prompt":"hi"}`, 200},
		{"GET", "/health", "two", "", 200},
	}
	for _, c := range cases {
		if got := status(t, c.method, e.URL()+c.path, c.key, c.body); got != c.want {
			t.Errorf("%s %s with key %q: %d, want %d", c.method, c.path, c.key, got, c.want)
		}
	}
	e.SetAPIKey("two")
	if got := status(t, "GET", e.URL()+"/v1/models", "one", ""); got != 401 {
		t.Errorf("the old key after SetAPIKey: %d, want 401", got)
	}
	if got := status(t, "GET", e.URL()+"/v1/models", "two", ""); got != 200 {
		t.Errorf("the new key after SetAPIKey: %d, want 200", got)
	}
}

// RestartAs is a new process of another build: /version, the process
// start and the NIXL compatibility hash all change.
func TestRestartAs(t *testing.T) {
	e := startEngine(t, nil)
	_, m0 := testkit.Get(t, e.URL()+"/metrics")
	before := CompatibilityHash(e.Compat())
	id := DefaultCompat("")
	id.VLLMVersion = "0.22.0"
	e.RestartAs(id)
	resp, err := client.Get(e.URL() + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Version string }
	_ = json.NewDecoder(resp.Body).Decode(&v)
	if v.Version != "0.22.0" || e.Compat().Model != "sim-model" {
		t.Errorf("/version %q, model %q after RestartAs: want 0.22.0 and the served model kept", v.Version, e.Compat().Model)
	}
	_, m1 := testkit.Get(t, e.URL()+"/metrics")
	if CompatibilityHash(e.Compat()) == before || startLine(m0) == startLine(m1) {
		t.Error("RestartAs kept the compatibility hash or the process start")
	}
}

// A restart is a new process start as the router reads it (the /metrics
// gauge, compared with vllm.SameStart) however little the clock moved:
// max(now, previous start + 1 ms), so tests may restart right away. A
// clock that moved 1 ns would otherwise read as the same process.
func TestRestartStartsStrictlyLater(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name     string
		moved    time.Duration // the clock's move between start and restart
		wantFrom time.Duration // the restarted start, from t0
	}{
		{"clock still", 0, time.Millisecond},
		{"clock moved 1 ns", time.Nanosecond, time.Millisecond},
		{"clock moved 500 µs", 500 * time.Microsecond, time.Millisecond},
		{"clock moved 1 ms", time.Millisecond, time.Millisecond},
		{"clock moved 2 s", 2 * time.Second, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := ports.NewFake(t0)
			e := startEngine(t, func(cf *Config) { cf.Clock = clk })
			first := processStart(t, e)
			clk.Advance(c.moved)
			e.Restart()
			got := processStart(t, e)
			if want := float64(t0.Add(c.wantFrom).UnixNano()) / 1e9; !vllm.SameStart(got, want) || vllm.SameStart(got, first) {
				t.Errorf("restarted start %.6f (first %.6f), want %.6f: a process other than the first", got, first, want)
			}
		})
	}
}

// Back-to-back restarts on a still clock are each a new process.
func TestRestartsInARowEachLater(t *testing.T) {
	e := startEngine(t, func(cf *Config) { cf.Clock = ports.NewFake(time.Unix(1_700_000_000, 0)) })
	prev := processStart(t, e)
	for i := range 3 {
		e.Restart()
		got := processStart(t, e)
		if got <= prev || vllm.SameStart(got, prev) {
			t.Fatalf("restart %d: start %.6f after %.6f, want a later process", i+1, got, prev)
		}
		prev = got
	}
}

func processStart(t *testing.T, e *Engine) float64 {
	t.Helper()
	_, b := testkit.Get(t, e.URL()+"/metrics")
	v, err := vllm.ParseProcessStart(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
