package router

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/saturation"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Routes the router does not serve answer in OpenAI's error shape.
func TestUnroutedRequestsAnswerInOpenAIShape(t *testing.T) {
	h := newHarness(t, pd, nil)
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/nope", 404, ""},
		{"POST", "/v1/embeddings", 404, ""},
		{"GET", "/v1/completions", 405, "POST"},
		{"DELETE", "/v1/models", 405, "GET, HEAD"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, h.srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e, ok := openAIError(b)
		if resp.StatusCode != tc.status || !ok || e.Type != "invalid_request_error" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q, want %d in OpenAI's JSON shape", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status)
		}
		if tc.allow != "" && resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, resp.Header.Get("Allow"), tc.allow)
		}
	}
}

func TestModelsReportTheContextLength(t *testing.T) {
	h := newHarness(t, pd, nil)
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	_, b := testkit.Get(t, h.srv.URL+"/v1/models")
	if json.Unmarshal(b, &list) != nil || len(list.Data) != 1 || list.Data[0].MaxModelLen != 4096 {
		t.Errorf("/v1/models %s, want the one model with max_model_len 4096", b)
	}
	resp, b := testkit.Get(t, h.srv.URL+"/v1/models/"+model)
	var card struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		MaxModelLen int    `json:"max_model_len"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &card) != nil || card.ID != model || card.Object != "model" || card.MaxModelLen != 4096 {
		t.Errorf("GET /v1/models/%s: %d %s", model, resp.StatusCode, b)
	}
	resp, b = testkit.Get(t, h.srv.URL+"/v1/models/other-model")
	e, ok := openAIError(b)
	if resp.StatusCode != 404 || !ok || e.Type != "invalid_request_error" || e.Code == nil || *e.Code != "model_not_found" ||
		e.Param == nil || *e.Param != "model" {
		t.Errorf("GET /v1/models/other-model: %d %s, want 404 model_not_found with param model", resp.StatusCode, b)
	}
}

// A client's own x-request-id comes back; the router's id is still there.
func TestClientRequestIDIsEchoed(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, body := range []string{`{"prompt":"x","max_tokens":2}`, `{"prompt":"x","max_tokens":0}`} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "client-abc")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.noteRID(resp)
		rid := resp.Header.Get("X-Narwhal-Request-Id")
		if resp.Header.Get("X-Request-Id") != "client-abc" || rid == "" || rid == "client-abc" {
			t.Fatalf("%s: X-Request-Id %q X-Narwhal-Request-Id %q, want the client's and the router's", body,
				resp.Header.Get("X-Request-Id"), rid)
		}
		if row := h.row(rid); row.ClientRID == nil || *row.ClientRID != "client-abc" {
			t.Errorf("journal client_rid %v", row.ClientRID)
		}
	}
}

// Every error type is one of OpenAI's, with narwhal's reason in code.
func TestErrorTypesAreOpenAIs(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.MaxAttempts = 1 })
	for _, e := range h.engines.Engines {
		e.SetFaults(simengine.Faults{HTTP500Rate: 1})
	}
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	e, _ := openAIError(out)
	if resp.StatusCode != 502 || e.Type != "server_error" || e.Code == nil || *e.Code != "prefill" || e.Message != "Upstream request failed" {
		t.Errorf("engine fault: %d %s, want 502 server_error code prefill", resp.StatusCode, out)
	}
	for _, e := range h.engines.Engines {
		e.SetFaults(simengine.Faults{})
	}

	h.router.ha.Fence("lease renewal failed")
	resp, out = h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	e, _ = openAIError(out)
	if resp.StatusCode != 503 || e.Type != "service_unavailable_error" || e.Code == nil || *e.Code != "standby" {
		t.Errorf("fenced: %d %s, want 503 service_unavailable_error code standby", resp.StatusCode, out)
	}
}

// A fenced router (its lease lost) says 503 even when it is also
// saturated: clients must go to the router that holds the lease.
func TestFencedRouterAnswers503NotSaturated(t *testing.T) {
	h := newHarness(t, pd, nil)
	for range saturation.Minimum {
		h.router.sat.Sized(units.Seconds(h.cfg.SLO.TTFT))
	}
	h.router.sat.Update(0, h.router.clock.Now())
	h.router.ha.Fence("lease renewal failed") // what renew does when the lease is lost
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %s Retry-After %q, want 503 with Retry-After", resp.StatusCode, out, resp.Header.Get("Retry-After"))
	}
	if row := h.row(resp.Header.Get("X-Request-Id")); row.Terminal != journal.TerminalRejected || *row.Reason != string(fault.NotReady) {
		t.Errorf("journal %s %v, want rejected not_ready", row.Terminal, *row.Reason)
	}
}
