package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// validate checks the fields the router reads (runtime.md §1.5) and
// records what it needs from them. Fields it does not read pass through.
func (c *call) validate(b map[string]json.RawMessage) *apiError {
	present := func(k string) (json.RawMessage, bool) {
		v, ok := b[k]
		return v, ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
	}
	var model string
	if v, ok := present("model"); ok && json.Unmarshal(v, &model) != nil {
		return invalidRequest("model must be a string", "model")
	}
	if v, ok := present("stream"); ok && json.Unmarshal(v, &c.stream) != nil {
		return invalidRequest("stream must be a boolean", "stream")
	}
	ints := map[string]int{}
	for _, k := range []string{"n", "best_of", "max_tokens", "max_completion_tokens"} {
		v, ok := present(k)
		if !ok {
			continue
		}
		n, isInt := intValue(v)
		if !isInt {
			return invalidRequest(k+" must be an integer", k)
		}
		ints[k] = n
	}
	if e := c.validateInput(present); e != nil {
		return e
	}
	if e := validateOptions(present, c.stream); e != nil {
		return e
	}
	if ints["n"] > 1 || ints["best_of"] > 1 {
		return &apiError{Status: 400, Type: "invalid_request_error",
			Message: "n and best_of must be 1: the prefill leg generates one sequence and both legs must agree"}
	}
	if model != "" && model != c.r.cfg.Model {
		return &apiError{Status: 404, Type: "invalid_request_error", Code: strp("model_not_found"), WithParam: true,
			Message: fmt.Sprintf("The model `%s` does not exist; this router serves `%s`.", model, c.r.cfg.Model)}
	}
	if v, ok := present("return_token_ids"); ok {
		_ = json.Unmarshal(v, &c.clientTokenIDs)
	}
	c.wanted = ints["max_tokens"]
	if n, ok := ints["max_completion_tokens"]; ok {
		c.wanted = n
	}
	return nil
}

// intValue accepts JSON integers only: not booleans, not 5.0.
func intValue(v json.RawMessage) (int, bool) {
	s := strings.TrimSpace(string(v))
	if strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	var n int
	if json.Unmarshal(v, &n) != nil {
		return 0, false
	}
	return n, true
}

func (c *call) validateInput(present func(string) (json.RawMessage, bool)) *apiError {
	if c.chat {
		v, ok := present("messages")
		var msgs []map[string]json.RawMessage
		if !ok || json.Unmarshal(v, &msgs) != nil || len(msgs) == 0 {
			return invalidRequest("messages must be a non-empty array of objects", "messages")
		}
		for _, m := range msgs {
			if m == nil {
				return invalidRequest("messages must be a non-empty array of objects", "messages")
			}
		}
		return nil
	}
	v, ok := present("prompt")
	if !ok {
		return invalidRequest("prompt is required", "prompt")
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || (t[0] != '"' && t[0] != '[') {
		return invalidRequest("prompt must be a string or an array", "prompt")
	}
	return nil
}

// validateOptions refuses options the two-leg path cannot honour.
func validateOptions(present func(string) (json.RawMessage, bool), stream bool) *apiError {
	if v, ok := present("vllm_xargs"); ok {
		var x map[string]json.RawMessage
		if json.Unmarshal(v, &x) != nil {
			return invalidRequest("vllm_xargs must be an object", "vllm_xargs")
		}
		for _, k := range []string{"kv_cache_report_mode", "kv_transfer_params", "ec_transfer_params"} {
			if _, set := x[k]; set {
				return invalidRequest("vllm_xargs must not set "+k+": the router owns the KV handoff", "vllm_xargs")
			}
		}
	}
	if v, ok := present("narwhal_continuation"); ok || v != nil {
		var on bool
		if !ok || json.Unmarshal(v, &on) != nil {
			return invalidRequest("narwhal_continuation must be a boolean", "narwhal_continuation")
		}
		if on {
			return invalidRequest("narwhal_continuation is not enabled on this router (fleet schema 1 has no continuation policy)", "narwhal_continuation")
		}
	}
	if stream {
		return nil
	}
	if _, ok := present("audio"); ok {
		return invalidRequest("audio output needs stream: true through this router", "audio")
	}
	if v, ok := present("modalities"); ok {
		var m []string
		if json.Unmarshal(v, &m) != nil || len(m) != 1 || m[0] != "text" {
			return invalidRequest("modalities other than [\"text\"] need stream: true through this router", "modalities")
		}
	}
	if v, ok := present("tools"); ok {
		var tools []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(v, &tools) != nil {
			return invalidRequest("tools must be an array", "tools")
		}
		for _, t := range tools {
			if t.Type != "function" {
				return invalidRequest("only function tools are supported without stream: true", "tools")
			}
		}
	}
	return nil
}
