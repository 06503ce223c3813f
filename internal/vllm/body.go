// Package vllm is the one way narwhal talks to an engine: shaping the
// prefill and decode request bodies of vLLM's disaggregated protocol,
// validating the kv_transfer_params a producer returns, reading the decode
// leg's SSE stream, counting tokens, and the control routes (/health,
// /version, /tokenize, /metrics). Every failure is a *fault.Error classified the
// way the router's retry, breaker and journal need.
package vllm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Body is a client request body with every field kept as raw JSON, so
// fields the router does not read reach the engine unchanged.
type Body map[string]json.RawMessage

// ParseBody parses a JSON object body.
func ParseBody(b []byte) (Body, error) {
	if m, ok := splitBody(b); ok {
		return m, nil
	}
	return decodeBody(b)
}

// decodeBody is ParseBody through encoding/json: the reference, and the
// answer (errors included) for whatever splitBody leaves alone.
func decodeBody(b []byte) (Body, error) {
	var m Body
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("body is not valid JSON: %v", err)
	}
	if m == nil {
		return nil, fmt.Errorf("body must be a JSON object")
	}
	if dec.More() {
		return nil, fmt.Errorf("body has content after the JSON object")
	}
	return m, nil
}

func (b Body) clone() Body {
	out := make(Body, len(b)+4)
	for k, v := range b {
		out[k] = v
	}
	return out
}

func raw(v any) json.RawMessage {
	out, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("vllm: marshal %T: %v", v, err)) // only called on literals
	}
	return out
}

var (
	jsonTrue  = json.RawMessage("true")
	jsonFalse = json.RawMessage("false")
	jsonOne   = json.RawMessage("1")
	// The NIXL producer handshake: compute the prompt's KV and keep it for a
	// remote decode.
	producerParams = json.RawMessage(`{"do_remote_decode":true}`)
)

// prefillDropped are the fields vLLM's producer leg does not accept.
var prefillDropped = []string{"stream_options", "min_tokens", "n", "best_of", "max_completion_tokens", "narwhal_continuation"}

// PrefillBody is the producer leg's body: one token, not streamed, with
// kv_transfer_params asking the engine to keep the KV for a remote decode.
func PrefillBody(b Body, model string) []byte {
	p := b.clone()
	for _, k := range prefillDropped {
		delete(p, k)
	}
	p["model"] = raw(model)
	p["max_tokens"] = jsonOne
	p["stream"] = jsonFalse
	p["kv_transfer_params"] = producerParams
	return marshalBody(p)
}

// DecodeBody is the consumer leg's body: the client's request, always
// streamed with per-token ids, with the producer's kv_transfer_params
// attached verbatim — or removed for same-engine decode (kvp nil), where
// the engine reuses its prefix cache.
func DecodeBody(b Body, model string, kvp json.RawMessage) []byte {
	d := b.clone()
	delete(d, "narwhal_continuation")
	d["model"] = raw(model)
	d["stream"] = jsonTrue
	d["return_token_ids"] = jsonTrue
	d["stream_interval"] = jsonOne
	if kvp == nil {
		delete(d, "kv_transfer_params")
	} else {
		d["kv_transfer_params"] = kvp
	}
	return marshalBody(d)
}

// The fields of a completion body vLLM's /tokenize reads: the prompt's,
// or a chat's messages and what shapes their template.
var (
	tokenizePrompt = []string{"prompt", "add_special_tokens"}
	tokenizeChat   = []string{"messages", "tools", "chat_template", "chat_template_kwargs", "continue_final_message",
		"add_generation_prompt", "add_special_tokens"}
)

// TokenizeBody is the /tokenize request that counts a completion body's
// prompt (chat: its messages) as the engine will.
func TokenizeBody(b Body, model string, chat bool) []byte {
	keys := tokenizePrompt
	if chat {
		keys = tokenizeChat
	}
	out := Body{"model": raw(model)}
	for _, k := range keys {
		if v, ok := b[k]; ok {
			out[k] = v
		}
	}
	return marshalBody(out)
}

// marshalBody is json.Marshal(b), by appendBody where it can.
func marshalBody(b Body) []byte {
	n := 2
	for k, v := range b {
		n += len(k) + len(v) + 4
	}
	if out, ok := appendBody(make([]byte, 0, n+n/8), b); ok {
		return out
	}
	return mustMarshal(b)
}

func mustMarshal(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("vllm: marshal body: %v", err)) // raw JSON values always marshal
	}
	return out
}
