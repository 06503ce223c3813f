package router

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/openai"
)

// legBodies records the completion bodies the engines received, by the
// leg's X-Request-Id (<rid>-a<n>-prefill / -decode).
type legBodies struct {
	mu     sync.Mutex
	bodies map[string]map[string]json.RawMessage
}

// recordLegs puts a recording reverse proxy in front of every engine; the
// proxies stop after the harness (cleanups run last-registered first).
func (l *legBodies) recordLegs(t *testing.T) func(*fleet.Config) {
	l.bodies = map[string]map[string]json.RawMessage{}
	return func(cfg *fleet.Config) {
		for i := range cfg.Engines {
			target, err := url.Parse(cfg.Engines[i].URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.FlushInterval = -1 // streams pass through as they come
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "completions") {
					raw, _ := io.ReadAll(r.Body)
					var b map[string]json.RawMessage
					_ = json.Unmarshal(raw, &b)
					l.mu.Lock()
					l.bodies[r.Header.Get("X-Request-Id")] = b
					l.mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(raw))
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			cfg.Engines[i].URL = srv.URL
		}
	}
}

func (l *legBodies) leg(id string) (map[string]json.RawMessage, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.bodies[id]
	return b, ok
}

func (l *legBodies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.bodies)
}

// walkSample is the value a field is sent with, and fields it needs.
type walkSample struct {
	v    string
	with map[string]any
}

// walkSamples has a value for every field of openai.Fields: one the
// router accepts, or, for a field it always refuses, one it refuses.
// chat and completions differ only in logprobs.
var walkSamples = map[string]walkSample{
	"messages": {v: `[{"role":"user","content":"walk the fields"}]`}, "prompt": {v: `"walk the fields"`},
	"model": {v: `"` + model + `"`}, "frequency_penalty": {v: `0.2`}, "logit_bias": {v: `{"5":1.5}`},
	"logprobs":     {v: `true`}, // chat's; completions send 1
	"top_logprobs": {v: `2`, with: map[string]any{"logprobs": true}}, "max_tokens": {v: `3`},
	"max_completion_tokens": {v: `3`}, "n": {v: `1`}, "presence_penalty": {v: `0.1`},
	"response_format": {v: `{"type":"text"}`}, "seed": {v: `7`}, "stop": {v: `["zzzz"]`}, "stream": {v: `false`},
	"stream_options": {v: `{"include_usage":true}`, with: map[string]any{"stream": true}},
	"temperature":    {v: `0.5`}, "top_p": {v: `0.9`},
	"tools":            {v: `[{"type":"function","function":{"name":"f","parameters":{}}}]`},
	"tool_choice":      {v: `"auto"`, with: map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}}},
	"reasoning_effort": {v: `"low"`}, "include_reasoning": {v: `true`}, "parallel_tool_calls": {v: `true`}, "user": {v: `"u-1"`},
	"use_beam_search": {v: `false`}, "top_k": {v: `5`}, "min_p": {v: `0.1`}, "repetition_penalty": {v: `1.1`},
	"length_penalty": {v: `1.0`}, "stop_token_ids": {v: `[99]`}, "include_stop_str_in_output": {v: `false`},
	"ignore_eos": {v: `false`}, "min_tokens": {v: `1`}, "skip_special_tokens": {v: `true`},
	"spaces_between_special_tokens": {v: `true`}, "truncate_prompt_tokens": {v: `64`}, "prompt_logprobs": {v: `1`},
	"allowed_token_ids": {v: `[1,2,3]`}, "bad_words": {v: `["zzzz"]`}, "echo": {v: `true`},
	"add_generation_prompt": {v: `true`}, "continue_final_message": {v: `false`}, "add_special_tokens": {v: `false`},
	"documents": {v: `[{"title":"t","text":"x"}]`}, "chat_template": {v: `"{{ messages }}"`},
	"chat_template_kwargs": {v: `{"k":1}`}, "mm_processor_kwargs": {v: `{"k":2}`},
	"structured_outputs": {v: `{"regex":"a+"}`}, "priority": {v: `0`}, "request_id": {v: `"client-id-1"`},
	"logits_processors": {v: `["mod.Proc"]`}, "return_tokens_as_token_ids": {v: `false`},
	"return_token_ids": {v: `false`}, "cache_salt": {v: `"salt-1"`}, "kv_transfer_params": {v: `{"do_remote_decode":true}`},
	"vllm_xargs": {v: `{"ext":1}`}, "max_repetition_pattern_size": {v: `0`}, "min_repetition_pattern_size": {v: `0`},
	"repetition_min_count": {v: `0`}, "suffix": {v: `"end"`}, "prompt_embeds": {v: `"AAAA"`},
}

// ownValues are the router's own values for the fields it sets, by leg.
var ownValues = map[string]map[string]string{
	"model":      {"prefill": `"` + model + `"`, "decode": `"` + model + `"`},
	"max_tokens": {"prefill": `1`}, "stream": {"prefill": `false`, "decode": `true`},
	"return_token_ids": {"decode": `true`},
}

// Every vLLM request field, sent alone through a router, reaches the legs
// openai.Fields says — forwarded unchanged, dropped, or replaced by the
// router's own value, as the engines received it — or is refused with 400
// naming it before any engine is called.
func TestFieldsReachTheirLegs(t *testing.T) {
	var legs legBodies
	h := newHarness(t, pd, legs.recordLegs(t))
	for _, f := range openai.Fields {
		for _, in := range []openai.Endpoint{openai.Chat, openai.Completion} {
			if f.In&in == 0 {
				continue
			}
			s, ok := walkSamples[f.Name]
			if !ok {
				t.Errorf("%s: the walk has no sample value for it", f.Name)
				continue
			}
			walkField(t, h, &legs, f, in == openai.Chat, s)
		}
	}
}

func walkField(t *testing.T, h *harness, legs *legBodies, f openai.Field, chat bool, s walkSample) {
	t.Helper()
	path, body := "/v1/completions", map[string]any{"model": model, "prompt": "walk", "max_tokens": 2}
	if chat {
		path, body = "/v1/chat/completions", map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "walk"}}, "max_tokens": 2}
	}
	for k, v := range s.with {
		body[k] = v
	}
	sample := json.RawMessage(s.v)
	if f.Name == "logprobs" && !chat {
		sample = json.RawMessage(`1`)
	}
	body[f.Name] = sample
	name := f.Name + map[bool]string{true: " (chat)", false: " (completions)"}[chat]
	before := legs.count()
	resp, raw := h.post(context.Background(), path, body)
	if f.Refused == "always" {
		e, isErr := openAIError(raw)
		if resp.StatusCode != 400 || !isErr || e.Param == nil || *e.Param != f.Name {
			t.Errorf("%s: %d %s, want 400 naming %s", name, resp.StatusCode, raw, f.Name)
		}
		if legs.count() != before {
			t.Errorf("%s: an engine was called for a refused request", name)
		}
		return
	}
	if resp.StatusCode != 200 {
		t.Errorf("%s: %d %s, want it served", name, resp.StatusCode, raw)
		return
	}
	rid := resp.Header.Get("X-Narwhal-Request-Id")
	if rid == "" {
		rid = resp.Header.Get("X-Request-Id")
	}
	for leg, fate := range map[string]openai.Fate{"prefill": f.Prefill, "decode": f.Decode} {
		got, ok := legs.leg(rid + "-a1-" + leg)
		if !ok {
			t.Errorf("%s: no %s leg recorded for %s", name, leg, rid)
			continue
		}
		checkLegField(t, name, leg, fate, got, f.Name, sample)
	}
}

func checkLegField(t *testing.T, name, leg string, fate openai.Fate, got map[string]json.RawMessage, field string, sample json.RawMessage) {
	t.Helper()
	v, present := got[field]
	switch fate {
	case openai.Drop:
		if present {
			t.Errorf("%s: the %s leg got %s, want it dropped", name, leg, v)
		}
	case openai.Forward:
		if !present || !sameJSON(v, sample) {
			t.Errorf("%s: the %s leg got %s (present %v), want the client's %s", name, leg, v, present, sample)
		}
	case openai.Own:
		want, ok := ownValues[field][leg]
		if !ok {
			t.Fatalf("%s: the test does not know the router's own value on the %s leg", name, leg)
		}
		if !present || !sameJSON(v, json.RawMessage(want)) {
			t.Errorf("%s: the %s leg got %s (present %v), want the router's %s", name, leg, v, present, want)
		}
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
