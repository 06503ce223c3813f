package router

import (
	"strings"
	"testing"
)

func TestStripTokenIDs(t *testing.T) {
	for in, want := range map[string]string{
		`{"choices":[{"text":"a","token_ids":[1,2]}]}`:                        `{"choices":[{"text":"a"}]}`,
		`{"choices":[{"token_ids":[1],"text":"a"}]}`:                          `{"choices":[{"text":"a"}]}`,
		`{"prompt_token_ids":[3],"choices":[{"text":"x","token_ids":[]}]}`:    `{"choices":[{"text":"x"}]}`,
		`{"choices":[{"text":"say \"token_ids\":[1] here","token_ids":[9]}]}`: `{"choices":[{"text":"say \"token_ids\":[1] here"}]}`,
		`{"choices":[{"text":"a"},{"text":"b","token_ids":[4]}]}`:             `{"choices":[{"text":"a"},{"text":"b"}]}`,
		`{"usage":{"prompt_tokens":1}}`:                                       `{"usage":{"prompt_tokens":1}}`,
	} {
		if got := string(stripTokenIDs([]byte(in))); got != want {
			t.Errorf("stripTokenIDs(%s)\n = %s\nwant %s", in, got, want)
		}
	}
}

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
