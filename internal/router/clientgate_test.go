package router

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Two rotated client keys; the values are unusual so a grep finds them
// anywhere they leak.
const (
	clientKeyA = "sk-gate-rotation-A-7f3c91"
	clientKeyB = "sk-gate-rotation-B-52e0d4"
	appOrigin  = "http://app.gate.test:5173"
)

// keyed starts a router over one prefill and one decode engine with the
// two client keys and, if given, CORS origins; its log goes to logs.
func keyed(t *testing.T, logs io.Writer, origins ...string) *harness {
	t.Helper()
	return startHarness(t, pd, harnessOptions{
		mod:    func(c *fleet.Config) { c.Serving.CORSOrigins = origins },
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		router: []func(*Options){func(o *Options) { o.APIKeys = []string{clientKeyA, clientKeyB} }},
	})
}

// send makes one request with headers and reads the answer; a response
// with the router's request id is one the journal must hold.
func (h *harness) send(method, path, body string, headers map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx(h.t), method, h.srv.URL+path, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("X-Narwhal-Request-Id") != "" {
		h.noteRID(resp)
	}
	return resp, out
}

// gateError decodes an OpenAI error body; ok is false when it is not one.
func gateError(b []byte) (code string, param *string, ok bool) {
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Code == nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
		return "", nil, false
	}
	return *e.Error.Code, e.Error.Param, true
}

const completionBody = `{"model":"sim-model","prompt":"gate","max_tokens":2}`

// With --api-key-env keys, every /v1/* route needs one of them; probes
// stay open. A 401 is OpenAI's shape with WWW-Authenticate and no journal
// row; each rotated key serves.
func TestClientKeysGuardV1(t *testing.T) {
	h := keyed(t, io.Discard)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(auth string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "Authorization": auth}
	}
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		status             int
	}{
		{"completion without a key", "POST", "/v1/completions", jsonCT, 401},
		{"completion with a wrong key", "POST", "/v1/completions", with("Bearer sk-wrong"), 401},
		{"completion with a key under another scheme", "POST", "/v1/completions", with("Basic " + clientKeyA), 401},
		{"chat without a key", "POST", "/v1/chat/completions", jsonCT, 401},
		{"models without a key", "GET", "/v1/models", nil, 401},
		{"one model without a key", "GET", "/v1/models/sim-model", nil, 401},
		{"an unknown /v1 path without a key", "GET", "/v1/embeddings", nil, 401},
		{"completion with the first key", "POST", "/v1/completions", with("Bearer " + clientKeyA), 200},
		{"completion with the second key", "POST", "/v1/completions", with("Bearer " + clientKeyB), 200},
		{"models with a key", "GET", "/v1/models", with("bearer " + clientKeyB), 200},
		{"health without a key", "GET", "/health", nil, 200},
		{"metrics without a key", "GET", "/metrics", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = completionBody
			}
			resp, out := h.send(tc.method, tc.path, body, tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, out, tc.status)
			}
			if tc.status != 401 {
				return
			}
			code, param, ok := gateError(out)
			if !ok || code != "invalid_api_key" || param != nil || resp.Header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("401 not in OpenAI's shape with invalid_api_key and WWW-Authenticate: %s %v", out, resp.Header)
			}
			if resp.Header.Get("X-Narwhal-Request-Id") != "" {
				t.Error("a 401 took a request id (and so a journal row)")
			}
		})
	}
	if resp, _ := h.send("GET", "/ready", "", nil); resp.StatusCode == 401 {
		t.Error("/ready asked for a key")
	}
	j := h.journalRows(2)
	if len(j) != 2 || j[0].Terminal != journal.TerminalCompleted || j[1].Terminal != journal.TerminalCompleted {
		t.Errorf("journal rows %v, want exactly the two keyed completions", terminals(j))
	}
}

// journalRows reads the request rows once want of them are written (a
// row lands just after its answer), or what is there after 5 s.
func (h *harness) journalRows(want int) []*journal.RequestRow {
	h.t.Helper()
	var rows []*journal.RequestRow
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		j, err := journal.ReadFile(h.jpath)
		if err != nil {
			h.t.Fatal(err)
		}
		rows = rows[:0]
		for _, r := range j.Requests {
			rows = append(rows, r.Request)
		}
		if len(rows) >= want || time.Now().After(end) {
			return rows
		}
	}
}

func terminals(rows []*journal.RequestRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Terminal)
	}
	return out
}

// A /v1/* POST that is not declared JSON is refused with 415 before its
// body is read: no engine sees it, and it has its journal row (invalid).
// Parameters such as charset are fine.
func TestCompletionsNeedJSON(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, tc := range []struct {
		contentType string
		status      int
	}{
		{"text/plain", 415},
		{"text/plain;charset=UTF-8", 415},
		{"application/x-www-form-urlencoded", 415},
		{"", 415},
		{"application/json; charset=utf-8", 200},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			headers := map[string]string{}
			if tc.contentType != "" {
				headers["Content-Type"] = tc.contentType
			}
			resp, out := h.send("POST", "/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, out, tc.status)
			}
			if tc.status != 415 {
				return
			}
			code, param, ok := gateError(out)
			if !ok || code != "unsupported_media_type" || param != nil || !strings.Contains(string(out), "Content-Type: application/json") {
				t.Errorf("415 not in OpenAI's shape naming the fix: %s", out)
			}
			row := h.row(resp.Header.Get("X-Narwhal-Request-Id"))
			if row.Terminal != journal.TerminalInvalid || row.Attempts != 0 || row.PrefillIID != nil || row.DecodeIID != nil || row.Status == nil || *row.Status != 415 {
				t.Errorf("journal row %+v, want invalid with status 415 and no engine", row)
			}
		})
	}
}

// CORS: a listed origin's preflight is answered 204 with what OpenAI's
// JS SDK sends in a browser, its answers carry its origin and Vary; an
// unlisted origin gets no CORS headers and a 403 preflight.
func TestCORSPreflight(t *testing.T) {
	h := keyed(t, io.Discard, appOrigin)
	preflight := func(origin string) (*http.Response, []byte) {
		return h.send("OPTIONS", "/v1/chat/completions", "", map[string]string{"Origin": origin,
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"})
	}
	resp, out := preflight(appOrigin)
	hd := resp.Header
	if resp.StatusCode != 204 || hd.Get("Access-Control-Allow-Origin") != appOrigin || !strings.Contains(hd.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(hd.Get("Access-Control-Allow-Headers")), "x-stainless-retry-count") || hd.Get("Access-Control-Max-Age") == "" ||
		!strings.Contains(strings.Join(hd.Values("Vary"), ","), "Origin") {
		t.Fatalf("listed preflight: %d %s %v", resp.StatusCode, out, hd)
	}
	resp, out = preflight("http://evil.gate.test")
	if code, _, ok := gateError(out); resp.StatusCode != 403 || !ok || code != "cors_origin_not_allowed" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("unlisted preflight: %d %s %v", resp.StatusCode, out, resp.Header)
	}
	auth := map[string]string{"Authorization": "Bearer " + clientKeyA, "Origin": appOrigin}
	if resp, _ := h.send("GET", "/v1/models", "", auth); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != appOrigin ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Errorf("listed GET: %d %v", resp.StatusCode, resp.Header)
	}
	auth["Origin"] = "http://evil.gate.test"
	if resp, _ := h.send("GET", "/v1/models", "", auth); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("unlisted origin got CORS headers: %v", resp.Header)
	}
	// A listed page can read the refusal of a missing key.
	if resp, _ := h.send("GET", "/v1/models", "", map[string]string{"Origin": appOrigin}); resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != appOrigin {
		t.Errorf("401 to a listed origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// Without cors_origins no /v1 answer carries a CORS header, and a
// preflight is refused.
func TestNoCORSByDefault(t *testing.T) {
	h := newHarness(t, pd, nil)
	resp, _ := h.send("GET", "/v1/models", "", map[string]string{"Origin": appOrigin})
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") || k == "Vary" {
			t.Errorf("default router sent %s", k)
		}
	}
	if resp, _ := h.send("OPTIONS", "/v1/completions", "", map[string]string{"Origin": appOrigin, "Access-Control-Request-Method": "POST"}); resp.StatusCode != 403 {
		t.Errorf("preflight without cors_origins: %d, want 403", resp.StatusCode)
	}
}

// The client keys never reach the journal, the log (at debug), the state
// document, the dashboard's view or the metrics, whether sent right or
// wrong.
func TestClientKeysNeverLeak(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	h := keyed(t, logs, appOrigin)
	for _, auth := range []string{"Bearer " + clientKeyA, "Bearer " + clientKeyB, "Bearer " + clientKeyA + "x", "Basic " + clientKeyB} {
		h.send("POST", "/v1/completions", completionBody, map[string]string{"Content-Type": "application/json", "Authorization": auth})
		h.send("POST", "/v1/completions", completionBody, map[string]string{"Content-Type": "text/plain", "Authorization": auth})
	}
	if rows := h.journalRows(4); len(rows) != 4 {
		t.Fatalf("journal rows %v, want 2 completions and 2 refused text/plain bodies", terminals(rows))
	}
	_, state := h.send("GET", "/narwhal/state", "", nil)
	_, metrics := h.send("GET", "/metrics", "", nil)
	_, view := h.send("GET", "/narwhal/ui/view.json", "", nil)
	jr, _ := readFile(h.jpath)
	for name, text := range map[string]string{"journal": jr, "log": logs.String(), "state": string(state), "metrics": string(metrics), "dashboard": string(view)} {
		if text == "" && name != "log" {
			t.Errorf("%s is empty: the check would pass for nothing", name)
		}
		for _, key := range []string{clientKeyA, clientKeyB} {
			if strings.Contains(text, key) {
				t.Errorf("a client key reached the %s", name)
			}
		}
	}
}
