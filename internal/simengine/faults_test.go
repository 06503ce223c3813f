package simengine

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

func TestFaults(t *testing.T) {
	body := map[string]any{"model": "sim-model", "prompt": "hello", "max_tokens": 5, "stream": true}
	cases := []struct {
		name  string
		f     Faults
		check func(t *testing.T, e *Engine)
	}{
		{"http 500", Faults{HTTP500Rate: 1}, func(t *testing.T, e *Engine) {
			if resp, b := post(t, e.URL()+"/v1/completions", body); resp.StatusCode != 500 || !strings.Contains(string(b), "InternalServerError") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		}},
		{"unhealthy", Faults{Unhealthy: true}, func(t *testing.T, e *Engine) {
			if resp, _ := testkit.Get(t, e.URL()+"/health"); resp.StatusCode != 503 {
				t.Fatalf("/health %d", resp.StatusCode)
			}
		}},
		{"refuse connections", Faults{RefuseConnections: true}, func(t *testing.T, e *Engine) {
			if _, err := client.Get(e.URL() + "/health"); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("connect: %v", err)
			}
			if err := e.SetFaults(Faults{}); err != nil {
				t.Fatal(err)
			}
			if resp, _ := testkit.Get(t, e.URL()+"/health"); resp.StatusCode != 200 {
				t.Fatalf("after clearing: %d", resp.StatusCode)
			}
		}},
		{"drop after 2 tokens", Faults{DropAfterTokens: 2}, func(t *testing.T, e *Engine) {
			b, _ := jsonBody(body)
			resp, err := client.Post(e.URL()+"/v1/completions", "application/json", b)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err == nil || strings.Contains(string(got), "[DONE]") || strings.Count(string(got), `"text"`) != 2 {
				t.Fatalf("read err %v, body %q", err, got)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := startEngine(t, func(cf *Config) { cf.Faults = c.f })
			c.check(t, e)
		})
	}
}

func jsonBody(v any) (io.Reader, error) {
	var buf bytes.Buffer
	_, b := v, &buf
	err := jsonEncode(b, v)
	return b, err
}

func TestAdminAndRestart(t *testing.T) {
	e := startEngine(t, nil)
	id0 := e.EngineID()
	_, m0 := testkit.Get(t, e.URL()+"/metrics")
	resp, b := post(t, e.AdminURL()+"/faults", map[string]any{"unhealthy": true})
	if resp.StatusCode != 200 || !e.Faults().Unhealthy {
		t.Fatalf("admin faults: %d %s", resp.StatusCode, b)
	}
	if resp, _ = post(t, e.AdminURL()+"/faults", map[string]any{"latency_multiplier": -1}); resp.StatusCode != 400 {
		t.Fatalf("bad fault accepted: %d", resp.StatusCode)
	}
	if resp, _ = post(t, e.AdminURL()+"/restart", nil); resp.StatusCode != 200 || e.EngineID() == id0 {
		t.Fatalf("restart: %d, id %s", resp.StatusCode, e.EngineID())
	}
	_, m1 := testkit.Get(t, e.URL()+"/metrics")
	if startLine(m0) == startLine(m1) {
		t.Fatalf("process_start_time_seconds unchanged after restart: %s", startLine(m1))
	}
}

func startLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "process_start_time_seconds ") {
			return l
		}
	}
	return ""
}

func TestAPIKey(t *testing.T) {
	e := startEngine(t, func(c *Config) { c.APIKey = "sekrit" })
	cases := []struct {
		path, key string
		want      int
	}{
		{"/v1/models", "", 401},
		{"/v1/models", "wrong", 401},
		{"/v1/models", "sekrit", 200},
		{"/health", "", 200},
		{"/metrics", "", 200},
		{"/version", "", 200},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", e.URL()+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		if resp, _ := testkit.Do(t, req); resp.StatusCode != c.want {
			t.Errorf("%s with key %q: %d, want %d", c.path, c.key, resp.StatusCode, c.want)
		}
	}
}

func TestStartupFailures(t *testing.T) {
	cases := []struct {
		name    string
		mod     func(*Config)
		wantLog string
	}{
		{"kv too small", func(c *Config) { c.KVCapacityTokens = 1024; c.MaxModelLen = 4096 }, "To serve at least one request with the model's max seq len (4096)"},
		{"cuda oom", func(c *Config) { c.FailStartup = "cuda-oom" }, "torch.OutOfMemoryError: CUDA out of memory."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			cfg := Config{Model: "m", Profile: fastProfile(), StartupLog: &log}
			c.mod(&cfg)
			e, err := Start(cfg)
			var se *StartupError
			if !errors.As(err, &se) || e != nil {
				t.Fatalf("Start: %v", err)
			}
			if !strings.Contains(log.String(), c.wantLog) || !strings.Contains(log.String(), "Engine core initialization failed") {
				t.Fatalf("log:\n%s", log.String())
			}
		})
	}
	var log bytes.Buffer
	e := startEngine(t, func(c *Config) { c.StartupLog = &log; c.KVCapacityTokens = 163840; c.MaxModelLen = 8192 })
	_ = e
	testkit.Mentions(t, "startup log", log.String(), "Model loading took 14.99 GiB memory", "Available KV cache memory: 20.0 GiB", "GPU KV cache size: 163,840 tokens", "Maximum concurrency for 8,192 tokens per request: 20.00x")
}

func TestCompatibilityHashMatchesPython(t *testing.T) {
	// python3 -c 'import json,hashlib; print(hashlib.sha256(json.dumps({...}, sort_keys=True).encode()).hexdigest())'
	id := DefaultCompat("meta-llama/Llama-3.1-8B-Instruct")
	const want = "15131e87ed1add6791084f61863fa9fad9ba7775a7b88398c17f54b0d43869ff"
	if got := CompatibilityHash(id); got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", "hello world", "  leading spaces and\nnew lines\t", "ünïcödé text ✓", strings.Repeat("abcdefghij ", 50)} {
		ids := Tokenize(s)
		if CountTokens(s) != len(ids) {
			t.Errorf("%q: count %d != %d", s, CountTokens(s), len(ids))
		}
		back, err := Detokenize(ids)
		if err != nil || back != s {
			t.Errorf("%q: round trip %q %v", s, back, err)
		}
	}
	if n := CountTokens("the cat sat on the mat"); n != 6 {
		t.Errorf("6 short words = %d tokens", n)
	}
	text := ""
	for i := 0; i < 50; i++ {
		text += TokenText(42, i)
	}
	if CountTokens(text) != 50 {
		t.Errorf("50 generated tokens re-tokenize to %d", CountTokens(text))
	}
}
