package router

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// front serves the harness's router through a server that counts the
// /v1/* requests reaching it (an SDK retry would be a second one) and
// notes every router request id for the harness's journal check.
type front struct {
	srv *httptest.Server
	mu  sync.Mutex
	v1  map[string]int // "METHOD path" -> requests
}

func (h *harness) front() *front {
	f := &front{v1: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Method + " " + req.URL.Path
		h.router.ServeHTTP(w, req)
		if rid := w.Header().Get("X-Narwhal-Request-Id"); rid != "" {
			h.mu.Lock()
			h.rids = append(h.rids, rid)
			h.mu.Unlock()
		}
		if guarded(req.URL.Path) {
			f.mu.Lock()
			f.v1[key]++
			f.mu.Unlock()
		}
	}))
	h.t.Cleanup(f.srv.Close) // before the harness's own close (cleanups run last-first)
	return f
}

func (f *front) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v1[key]
}

// The Go SDK (openai-go v3, default two retries) hears a wrong key once:
// it does not retry a 401 (shouldRetry retries only 408, 409, 429, 5xx:
// https://github.com/openai/openai-go/blob/54672cf6b2c21a0e2ac0d2a7d7bed8680eee3e44/internal/requestconfig/requestconfig.go).
// With a key it completes.
func TestGoSDKKeyOnceNoRetry(t *testing.T) {
	h := keyed(t, io.Discard)
	f := h.front()
	params := openai.CompletionNewParams{Model: "sim-model", MaxTokens: openai.Int(2),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("sdk")}}
	wrong := openai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey("sk-wrong"), option.WithMaxRetries(2))
	_, err := wrong.Completions.New(ctx(t), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("wrong key: %v, want the SDK's 401 error with code invalid_api_key", err)
	}
	if n := f.count("POST /v1/completions"); n != 1 {
		t.Fatalf("the router saw %d attempts for a 401, want 1 (no retry)", n)
	}
	right := openai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey(clientKeyB), option.WithMaxRetries(2))
	c, err := right.Completions.New(ctx(t), params)
	if err != nil || c.Usage.CompletionTokens != 2 {
		t.Fatalf("with the key: %v %+v", err, c)
	}
	if n := f.count("POST /v1/completions"); n != 2 {
		t.Errorf("%d attempts in all, want 2", n)
	}
}

// The JavaScript SDK likewise: one attempt for a wrong key (its
// shouldRetry, src/client.ts:
// https://github.com/openai/openai-node/blob/e3a0a9c8b01d0e38e96bfee10ff539aa282db4ed/src/client.ts),
// an AuthenticationError with the code, then a completion with the key.
func TestJSSDKKeyOnceNoRetry(t *testing.T) {
	node, dir := testkit.NodeSDK(t)
	h := keyed(t, io.Discard)
	f := h.front()
	const script = `
import OpenAI from 'openai';
const baseURL = process.env.GATE_BASE;
const params = { model: 'sim-model', prompt: 'sdk', max_tokens: 2 };
const out = {};
try {
  await new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 2, timeout: 20000 }).completions.create(params);
  out.wrong = 'accepted';
} catch (e) {
  out.wrong = e.status; out.code = e.code; out.auth = e instanceof OpenAI.AuthenticationError;
}
const c = await new OpenAI({ baseURL, apiKey: process.env.GATE_KEY, maxRetries: 2, timeout: 20000 }).completions.create(params);
out.tokens = c.usage && c.usage.completion_tokens;
console.log(JSON.stringify(out));
`
	cctx, cancel := context.WithTimeout(ctx(t), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, "--input-type=module", "-e", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATE_BASE="+f.srv.URL+"/v1", "GATE_KEY="+clientKeyA)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Wrong  any    `json:"wrong"`
		Code   string `json:"code"`
		Auth   bool   `json:"auth"`
		Tokens int    `json:"tokens"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Wrong != float64(401) || got.Code != "invalid_api_key" || !got.Auth || got.Tokens != 2 {
		t.Fatalf("JS SDK saw %s (%v)", out, err)
	}
	if n := f.count("POST /v1/completions"); n != 2 {
		t.Errorf("the router saw %d attempts, want 2: one 401 (no retry) and one completion", n)
	}
}

// A page on another loopback origin cannot get a completion out of the
// router from a browser: a "simple" text/plain POST (no preflight) is
// sent but refused 415 before any engine, and a JSON POST needs a
// preflight that an unlisted origin is refused, so it is never sent.
func TestBrowserPageCannotDriveCompletions(t *testing.T) {
	chromium := testkit.Tool(t, "chromium", "Debian package chromium: make tools (scripts/apt-install.sh chromium)")
	h := newHarness(t, pd, nil)
	f := h.front()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>elsewhere</title>")
	}))
	defer page.Close()
	bctx := headless(t, chromium)
	if err := chromedp.Do(bctx, chromedp.Navigate(page.URL+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	js := `(async () => {
  const router = ` + jsString(f.srv.URL) + `;
  const body = JSON.stringify({model: 'sim-model', prompt: 'from a page', max_tokens: 2});
  const out = {};
  try {
    const r = await fetch(router + '/v1/completions', {method: 'POST', mode: 'no-cors', body, headers: {'Content-Type': 'text/plain'}});
    out.simple = 'sent (' + r.type + ')';
  } catch (e) { out.simple = 'blocked: ' + e.message; }
  try {
    const r = await fetch(router + '/v1/completions', {method: 'POST', body, headers: {'Content-Type': 'application/json'}});
    out.json = 'status ' + r.status;
  } catch (e) { out.json = 'blocked: ' + e.message; }
  return out;
})()`
	res, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("page script: %v", err)
	}
	t.Logf("page saw %v", res)
	if !strings.HasPrefix(res["json"], "blocked") {
		t.Errorf("the JSON request was readable by the page: %v", res)
	}
	if f.count("OPTIONS /v1/completions") != 1 || f.count("POST /v1/completions") != 1 {
		t.Errorf("router saw %v, want one refused preflight and one simple POST", f.v1)
	}
	rows := h.journalRows(1)
	if len(rows) != 1 || rows[0].Terminal != journal.TerminalInvalid || rows[0].Attempts != 0 {
		t.Errorf("journal %v, want only the refused text/plain POST (invalid, no engine)", terminals(rows))
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
