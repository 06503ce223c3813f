package vllm

import (
	"bytes"
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Handoff is what a producer returned: the descriptor the decode leg must
// carry verbatim (keys the router does not know are kept as they are).
type Handoff struct {
	Params   json.RawMessage // the kv_transfer_params object, compact
	EngineID string          // remote_engine_id
	Tokens   int             // remote_num_tokens, 0 when absent
	// CachedTokens is the producer's usage.prompt_tokens_details.
	// cached_tokens; nil when it reported none (vLLM without
	// --enable-prompt-tokens-details).
	CachedTokens *int
}

// parseHandoff finds and validates the descriptor in a producer's
// response: choices[0].kv_transfer_params, else the top-level field.
func parseHandoff(body []byte) (*Handoff, error) {
	f, ok := fastProducer(body)
	if !ok {
		var e error
		if f, e = decodeProducer(body); e != nil {
			return nil, e
		}
	}
	params := f.top
	if isObject(f.choice) {
		params = f.choice
	}
	h, e := validateHandoff(params)
	if h != nil && f.details {
		h.CachedTokens = f.cached
	}
	return h, e
}

// decodeProducer is fastProducer by encoding/json: the reference, and the
// answer for every shape the scanner leaves.
func decodeProducer(body []byte) (producerFields, error) {
	var resp struct {
		KV      json.RawMessage `json:"kv_transfer_params"`
		Choices []struct {
			KV json.RawMessage `json:"kv_transfer_params"`
		} `json:"choices"`
		Usage struct {
			Details *struct {
				Cached *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return producerFields{}, invalid(fault.Prefill, fault.ClassKVHandoff, "producer response is not JSON: %v", err)
	}
	f := producerFields{top: resp.KV}
	if len(resp.Choices) > 0 {
		f.choice = resp.Choices[0].KV
	}
	if d := resp.Usage.Details; d != nil {
		f.details, f.cached = true, d.Cached
	}
	return f, nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 1 && b[0] == '{'
}

// validateHandoff checks the fields the decode engine indexes directly and
// keeps everything else opaque.
func validateHandoff(params json.RawMessage) (*Handoff, error) {
	if h, ok := fastHandoff(params); ok {
		return &h, nil
	}
	return decodeHandoff(params)
}

// decodeHandoff is validateHandoff by encoding/json: the reference the
// scanner is held to, and the answer for every shape it leaves.
func decodeHandoff(params json.RawMessage) (*Handoff, error) {
	var fields map[string]json.RawMessage
	if !isObject(params) || json.Unmarshal(params, &fields) != nil || len(fields) == 0 {
		return nil, invalid(fault.Prefill, fault.ClassKVHandoff, "missing handoff parameters")
	}
	var id string
	if json.Unmarshal(fields["remote_engine_id"], &id) != nil || id == "" {
		return nil, invalid(fault.Prefill, fault.ClassKVHandoff, "handoff requires remote_engine_id")
	}
	if !blockIDsValid(fields["remote_block_ids"]) {
		return nil, invalid(fault.Prefill, fault.ClassKVHandoff, "handoff requires flat or grouped nonnegative remote_block_ids")
	}
	var n int
	_ = json.Unmarshal(fields["remote_num_tokens"], &n)
	var compact bytes.Buffer
	if err := json.Compact(&compact, params); err != nil {
		return nil, invalid(fault.Prefill, fault.ClassKVHandoff, "handoff parameters: %v", err)
	}
	return &Handoff{Params: compact.Bytes(), EngineID: id, Tokens: n}, nil
}

// blockIDsValid accepts a list of non-negative ints or a list of such
// lists (one per KV-cache group). Booleans and fractions are not ids.
func blockIDsValid(raw json.RawMessage) bool {
	var flat []json.Number
	if decodeNumbers(raw, &flat) {
		return allIDs(flat)
	}
	var grouped [][]json.Number
	if !decodeNumbers(raw, &grouped) {
		return false
	}
	for _, g := range grouped {
		if !allIDs(g) {
			return false
		}
	}
	return grouped != nil
}

func decodeNumbers(raw json.RawMessage, dst any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return len(raw) > 0 && dec.Decode(dst) == nil
}

func allIDs(ns []json.Number) bool {
	if ns == nil {
		return false
	}
	for _, n := range ns {
		i, err := n.Int64()
		if err != nil || i < 0 {
			return false
		}
	}
	return true
}
