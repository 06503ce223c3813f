package router

import (
	"strings"
	"testing"
)

func TestResponseIDsCarryTheRouterRequestID(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, stream := range []bool{false, true} {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "id me", "max_tokens": 2, "stream": stream})
		rid := resp.Header.Get("X-Request-Id")
		if !strings.Contains(string(out), `"id":"cmpl-`+rid+`"`) || strings.Contains(string(out), "-a1-decode") {
			t.Errorf("stream=%v: response ids are not cmpl-<x-request-id>:\n%.300s", stream, out)
		}
	}
}
