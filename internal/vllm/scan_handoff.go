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
	if !s.eat('{') {
		return h, false
	}
	ok = s.members(func(key []byte) bool {
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
