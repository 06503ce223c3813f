package vllm

import (
	"bytes"
	"strconv"
)

// fastHandoff reads a well-formed descriptor the way validateHandoff's
// decoding does, without a map of raw fields or a decoder per block-id
// list (about forty allocations of a routed request). It answers only
// the plain success shape: a remote_engine_id that needs no decoding,
// remote_block_ids as a flat or grouped list of plain non-negative
// integers, remote_num_tokens absent or plain digits, no repeated key.
// Anything else, every error included, is left to the decoding path
// (ok false); FuzzFastHandoff holds the two to the same result.
func fastHandoff(params []byte) (h Handoff, ok bool) {
	s := scanner{b: params}
	var seen uint8
	var id []byte
	s.ws()
	ok = s.object(func(key []byte) bool {
		switch string(key) {
		case "remote_engine_id":
			return once(&seen, 1) && s.plainString(&id) && len(id) > 0
		case "remote_block_ids":
			return once(&seen, 2) && s.blockIDs()
		case "remote_num_tokens":
			start := s.i
			if !once(&seen, 4) || !s.plainID() {
				return false
			}
			h.Tokens, _ = strconv.Atoi(string(s.b[start:s.i]))
			return true
		}
		return s.skip(0)
	})
	s.ws()
	if !ok || s.i != len(params) || seen&3 != 3 {
		return Handoff{}, false
	}
	h.EngineID = string(id)
	if bytes.ContainsAny(params, " \t\r\n") {
		return Handoff{}, false // json.Compact's business
	}
	h.Params = bytes.Clone(params)
	return h, true
}

// plainID reads a non-negative integer in plain digits that fits int64.
func (s *scanner) plainID() bool {
	start := s.i
	d := s.digits()
	// At most 18 digits fits int64; a leading zero is not JSON.
	return d > 0 && d <= 18 && (d == 1 || s.b[start] != '0')
}

// blockIDs reads a list of plain ids, or a list of such lists.
func (s *scanner) blockIDs() bool {
	if s.i+1 < len(s.b) && s.b[s.i] == '[' {
		t := scanner{b: s.b, i: s.i + 1}
		t.ws()
		if t.i < len(t.b) && t.b[t.i] == '[' {
			return s.elements(func() bool { return s.elements(s.plainID) })
		}
	}
	return s.elements(s.plainID)
}

// producerFields are what parseHandoff reads from a producer's response:
// the top-level and the first choice's kv_transfer_params (raw, nil when
// absent) and usage.prompt_tokens_details.cached_tokens.
type producerFields struct {
	top, choice []byte
	details     bool // prompt_tokens_details was an object
	cached      *int
}

// fastProducer reads those fields from a plain response without decoding
// it; ok is false when it gave up (a repeated or case-folded key, a
// non-object choice, a cached count that is not plain digits, anything
// malformed) and encoding/json answers. FuzzFastProducer holds the two to
// the same result.
func fastProducer(body []byte) (f producerFields, ok bool) {
	s := scanner{b: body}
	var seen uint8
	s.ws()
	ok = s.object(func(key []byte) bool {
		switch string(key) {
		case "kv_transfer_params":
			return once(&seen, 1) && s.raw(&f.top)
		case "choices":
			return once(&seen, 2) && s.nullOr(func() bool { return s.producerChoices(&f) })
		case "usage":
			return once(&seen, 4) && s.nullOr(func() bool { return s.object(func(k []byte) bool { return s.usage(k, &f) }) })
		}
		return !foldsTo(key, "kv_transfer_params", "choices", "usage") && s.skip(0)
	})
	s.ws()
	return f, ok && s.i == len(body)
}

// raw consumes one value and points dst at its bytes.
func (s *scanner) raw(dst *[]byte) bool {
	start := s.i
	if !s.skip(0) {
		return false
	}
	*dst = s.b[start:s.i]
	return true
}

// producerChoices reads the first choice's kv_transfer_params; every
// choice must be an object, as decoding into a struct requires.
func (s *scanner) producerChoices(f *producerFields) bool {
	first := true
	return s.elements(func() bool {
		if !first {
			return s.i < len(s.b) && s.b[s.i] == '{' && s.skip(0)
		}
		first = false
		var seen uint8
		return s.object(func(key []byte) bool {
			if string(key) == "kv_transfer_params" {
				return once(&seen, 1) && s.raw(&f.choice)
			}
			return !foldsTo(key, "kv_transfer_params") && s.skip(0)
		})
	})
}

// usage reads one member of usage: prompt_tokens_details.cached_tokens.
func (s *scanner) usage(key []byte, f *producerFields) bool {
	if string(key) != "prompt_tokens_details" {
		return !foldsTo(key, "prompt_tokens_details") && s.skip(0)
	}
	if f.details || s.lit("null") {
		return !f.details // a repeated key is left to encoding/json
	}
	f.details = true
	var seen uint8
	return s.object(func(k []byte) bool {
		if string(k) != "cached_tokens" {
			return !foldsTo(k, "cached_tokens") && s.skip(0)
		}
		start := s.i
		if !once(&seen, 1) || !(s.lit("null") || s.plainID()) {
			return false
		}
		if n, err := strconv.Atoi(string(s.b[start:s.i])); err == nil {
			f.cached = &n
		}
		return true
	})
}
