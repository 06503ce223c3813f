package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Request is what the router reads from a valid completion body.
type Request struct {
	Stream         bool   // the client asked for a stream
	ClientTokenIDs bool   // the client asked for return_token_ids itself
	Wanted         int    // max_completion_tokens, else max_tokens; 0 when neither is set
	WantedParam    string // the field Wanted came from: max_tokens or max_completion_tokens
}

// lookup finds a field; a JSON null counts as absent.
type lookup func(string) (json.RawMessage, bool)

// Validate checks the fields the router reads (runtime.md §1.5), and the
// values and shapes an engine would refuse only after a leg was paid for
// (docs/router.md, "Errors"), and returns what the router needs from them.
// chat says the body is a chat completion; model is the one served model.
// Fields it does not read pass through, to the legs Fields (fields.go)
// says.
func Validate(b map[string]json.RawMessage, chat bool, model string) (Request, *Error) {
	present := func(k string) (json.RawMessage, bool) {
		v, ok := b[k]
		return v, ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
	}
	var q Request
	var asked string
	if v, ok := present("model"); ok && json.Unmarshal(v, &asked) != nil {
		return q, InvalidType("model", "model must be a string")
	}
	if v, ok := present("stream"); ok && json.Unmarshal(v, &q.Stream) != nil {
		return q, InvalidType("stream", "stream must be a boolean")
	}
	ints, e := counts(present)
	if e != nil {
		return q, e
	}
	if e := validateInput(present, chat); e != nil {
		return q, e
	}
	if e := validateOptions(present, q.Stream); e != nil {
		return q, e
	}
	if e := validateFields(present, chat); e != nil {
		return q, e
	}
	if asked != "" && asked != model {
		return q, ModelNotFound(asked, model)
	}
	if v, ok := present("return_token_ids"); ok {
		_ = json.Unmarshal(v, &q.ClientTokenIDs)
	}
	q.Wanted, q.WantedParam = ints["max_tokens"], "max_tokens"
	if n, ok := ints["max_completion_tokens"]; ok {
		q.Wanted, q.WantedParam = n, "max_completion_tokens"
	}
	return q, nil
}

// counts reads the integer fields: each a JSON integer of at least 1, and
// n and best_of exactly 1 (the prefill leg generates one sequence and both
// legs must agree on the sampling width).
func counts(present lookup) (map[string]int, *Error) {
	ints := map[string]int{}
	for _, k := range []string{"n", "best_of", "max_tokens", "max_completion_tokens"} {
		v, ok := present(k)
		if !ok {
			continue
		}
		n, isInt := intValue(v)
		switch {
		case !isInt:
			return nil, InvalidType(k, k+" must be an integer")
		case n < 1:
			return nil, InvalidValue(k, fmt.Sprintf("%s must be at least 1, got %d", k, n))
		case n > 1 && (k == "n" || k == "best_of"):
			return nil, Unsupported(k, fmt.Sprintf("%s must be 1: this router's prefill leg generates one sequence and both legs must agree; "+
				"send %d requests instead", k, n))
		}
		ints[k] = n
	}
	return ints, nil
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

func validateInput(present lookup, chat bool) *Error {
	if chat {
		v, ok := present("messages")
		var msgs []map[string]json.RawMessage
		if !ok || json.Unmarshal(v, &msgs) != nil || len(msgs) == 0 {
			return InvalidType("messages", "messages must be a non-empty array of objects")
		}
		for i, m := range msgs {
			if m == nil {
				return InvalidType("messages", "messages must be a non-empty array of objects")
			}
			if e := validateContent(i, m["content"]); e != nil {
				return e
			}
		}
		return nil
	}
	v, ok := present("prompt")
	if !ok {
		return InvalidType("prompt", "prompt is required")
	}
	return validatePrompt(v, true)
}

// validatePrompt accepts what vLLM serves as one prompt: a non-empty
// string, a non-empty array of token ids, or (top level only) an array
// holding one of those. A batch of several prompts is refused: both legs
// and the KV handoff are per sequence.
func validatePrompt(v json.RawMessage, top bool) *Error {
	const shape = "prompt must be a string, an array of token ids, or an array of one of those"
	t := bytes.TrimSpace(v)
	switch {
	case len(t) > 0 && t[0] == '"':
		var s string
		if json.Unmarshal(t, &s) != nil {
			return InvalidType("prompt", shape)
		}
		if s == "" {
			return InvalidValue("prompt", "prompt must not be empty")
		}
		return nil
	case len(t) == 0 || t[0] != '[':
		return InvalidType("prompt", shape)
	}
	var items []json.RawMessage
	if json.Unmarshal(t, &items) != nil {
		return InvalidType("prompt", shape)
	}
	if len(items) == 0 {
		return InvalidValue("prompt", "prompt must not be empty")
	}
	if first := bytes.TrimSpace(items[0]); len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
		return tokenIDs(items)
	}
	if !top {
		return InvalidType("prompt", shape)
	}
	if len(items) > 1 {
		return Unsupported("prompt", fmt.Sprintf("batch prompts (an array of %d prompts) are not supported: send one prompt per request", len(items)))
	}
	return validatePrompt(items[0], false)
}

// tokenIDs checks a token-id prompt: non-negative integers.
func tokenIDs(items []json.RawMessage) *Error {
	for i, it := range items {
		if n, ok := intValue(it); !ok || n < 0 {
			return InvalidValue("prompt", fmt.Sprintf("prompt[%d] is not a token id: token ids are non-negative integers", i))
		}
	}
	return nil
}

// textParts are the chat content parts the two-leg path serves. Images,
// audio, video and files need the encoder cache handed over too, which
// fleet schema 1 has no policy for.
var textParts = map[string]bool{"text": true, "refusal": true}

// validateContent checks messages[i].content: absent, null, a string, or
// an array of text parts.
func validateContent(i int, raw json.RawMessage) *Error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) || t[0] == '"' {
		return nil
	}
	param := fmt.Sprintf("messages[%d].content", i)
	var parts []struct {
		Type *string `json:"type"`
	}
	if t[0] != '[' || json.Unmarshal(t, &parts) != nil {
		return InvalidType(param, param+" must be a string or an array of content parts")
	}
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch {
		case p.Type == nil:
			return InvalidType(pp, pp+" needs a type")
		case !textParts[*p.Type]:
			return Unsupported(pp, fmt.Sprintf("%s is a %q part: this router serves text only (no image, audio, video or file input); "+
				"send text parts", pp, *p.Type))
		}
	}
	return nil
}

// validateOptions refuses options the two-leg path cannot honour, and
// stream_options an engine would refuse.
func validateOptions(present lookup, stream bool) *Error {
	if v, ok := present("vllm_xargs"); ok {
		var x map[string]json.RawMessage
		if json.Unmarshal(v, &x) != nil {
			return InvalidType("vllm_xargs", "vllm_xargs must be an object")
		}
		for _, k := range []string{"kv_cache_report_mode", "kv_transfer_params", "ec_transfer_params"} {
			if _, set := x[k]; set {
				return Unsupported("vllm_xargs", "vllm_xargs must not set "+k+": the router owns the KV handoff")
			}
		}
	}
	if v, ok := present("narwhal_continuation"); ok || v != nil {
		var on bool
		if !ok || json.Unmarshal(v, &on) != nil {
			return InvalidType("narwhal_continuation", "narwhal_continuation must be a boolean")
		}
		if on {
			return Unsupported("narwhal_continuation", "narwhal_continuation is not enabled on this router (fleet schema 1 has no continuation policy)")
		}
	}
	if e := validateStreamOptions(present, stream); e != nil {
		return e
	}
	if stream {
		return nil
	}
	return validateNonStreaming(present)
}

// validateStreamOptions: an object of booleans, and only with stream: true
// (as OpenAI and vLLM require).
func validateStreamOptions(present lookup, stream bool) *Error {
	v, ok := present("stream_options")
	if !ok {
		return nil
	}
	var so map[string]json.RawMessage
	if json.Unmarshal(v, &so) != nil || so == nil {
		return InvalidType("stream_options", "stream_options must be an object")
	}
	if !stream {
		return InvalidValue("stream_options", "stream_options is only allowed with stream: true")
	}
	for _, k := range []string{"include_usage", "continuous_usage_stats"} {
		var on bool
		if raw, set := so[k]; set && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) && json.Unmarshal(raw, &on) != nil {
			return InvalidType("stream_options."+k, "stream_options."+k+" must be a boolean")
		}
	}
	return nil
}

// validateNonStreaming refuses output options the assembled (non-streamed)
// response cannot carry.
func validateNonStreaming(present lookup) *Error {
	if _, ok := present("audio"); ok {
		return Unsupported("audio", "audio output needs stream: true through this router")
	}
	if v, ok := present("modalities"); ok {
		var m []string
		if json.Unmarshal(v, &m) != nil || len(m) != 1 || m[0] != "text" {
			return Unsupported("modalities", "modalities other than [\"text\"] need stream: true through this router")
		}
	}
	if v, ok := present("tools"); ok {
		var tools []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(v, &tools) != nil {
			return InvalidType("tools", "tools must be an array")
		}
		for _, t := range tools {
			if t.Type != "function" {
				return Unsupported("tools", "only function tools are supported without stream: true")
			}
		}
	}
	return nil
}

// validateFields refuses the fields the two-leg path cannot serve (the
// Refused column of Fields), and checks the logprobs fields the decode
// leg answers, so the request fails before a leg is paid for.
func validateFields(present lookup, chat bool) *Error {
	for _, f := range Fields {
		why, always := refusedAlways[f.Name]
		if _, set := present(f.Name); always && set {
			return Unsupported(f.Name, fmt.Sprintf("%s is not supported through this router: %s; remove %s", f.Name, why, f.Name))
		}
	}
	if v, ok := present("use_beam_search"); ok {
		var on bool
		if json.Unmarshal(v, &on) != nil {
			return InvalidType("use_beam_search", "use_beam_search must be a boolean")
		}
		if on {
			return Unsupported("use_beam_search", "use_beam_search is not supported through this router: vLLM's beam search runs its own "+
				"generation loop, which the prefill/decode split cannot serve; remove use_beam_search")
		}
	}
	wants, e := validateLogprobs(present, chat)
	if e != nil {
		return e
	}
	if v, ok := present("echo"); ok {
		var on bool
		if json.Unmarshal(v, &on) != nil {
			return InvalidType("echo", "echo must be a boolean")
		}
		if on && wants {
			return Unsupported("echo", "echo with logprobs asks for the prompt's logprobs, which this router cannot return "+
				"(the prompt is computed on the prefill leg); send echo or logprobs, not both")
		}
	}
	return nil
}

// validateLogprobs checks chat's logprobs (a boolean) and top_logprobs (an
// integer ≥ -1, only with logprobs), or completions' logprobs (an integer
// ≥ 0), as vLLM's check_logprobs does, and says whether logprobs are
// asked for.
func validateLogprobs(present lookup, chat bool) (bool, *Error) {
	v, ok := present("logprobs")
	if !chat {
		if !ok {
			return false, nil
		}
		if n, isInt := intValue(v); !isInt || n < 0 {
			return false, InvalidType("logprobs", "logprobs must be an integer ≥ 0 on /v1/completions (the number of top tokens per position)")
		}
		return true, nil
	}
	var on bool
	if ok && json.Unmarshal(v, &on) != nil {
		return false, InvalidType("logprobs", "logprobs must be a boolean on /v1/chat/completions (use top_logprobs for the count)")
	}
	if t, set := present("top_logprobs"); set {
		n, isInt := intValue(t)
		switch {
		case !isInt:
			return false, InvalidType("top_logprobs", "top_logprobs must be an integer")
		case n < -1:
			return false, InvalidValue("top_logprobs", fmt.Sprintf("top_logprobs must be ≥ 0 (or -1 for all), got %d", n))
		case n != 0 && !on:
			return false, InvalidValue("top_logprobs", "top_logprobs needs logprobs: true")
		}
	}
	return on, nil
}
