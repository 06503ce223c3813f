package simengine

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/testkit"
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
	time.Sleep(5 * time.Millisecond)
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
