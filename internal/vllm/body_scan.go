package vllm

import (
	"encoding/json"
	"slices"
)

// The client's body is split into raw fields once per request and joined
// again for each leg. Through encoding/json that was a map decoder (a
// reflected allocation per field), then a sorted map encoder per leg that
// re-validates every value; together about 6 % of the router's CPU at 200
// streams. splitBody and appendBody do the same with the event scanner.
// Both answer only inputs whose result they are sure of (ok false
// otherwise) and leave the rest to encoding/json, which stays the
// reference: FuzzBody holds the two to the same maps and the same bytes.

// splitBody is ParseBody for an object whose keys need no decoding: each
// value is a slice of b, exactly the bytes encoding/json would keep for a
// json.RawMessage (b must not change afterwards; ParseBody's callers own
// it). A repeated key keeps its last value, as decoding into a map does.
func splitBody(b []byte) (Body, bool) {
	s := scanner{b: b}
	s.ws()
	m := make(Body, 16)
	ok := s.object(func(key []byte) bool {
		start := s.i
		if !s.skip(0) {
			return false
		}
		m[string(key)] = b[start:s.i:s.i]
		return true
	})
	s.ws()
	if !ok || s.i != len(b) {
		return nil, false
	}
	return m, true
}

// appendBody appends json.Marshal(b): keys in sorted order, each value
// compacted with HTML's characters escaped, as encoding/json writes a
// json.RawMessage. ok is false, and nothing appended, for a key that
// encoding/json would escape or a value that is not exactly one JSON value.
func appendBody(dst []byte, b Body) ([]byte, bool) {
	var arr [32]string
	keys := arr[:0]
	for k, v := range b {
		if !plainKey(k) || !oneValue(v) {
			return dst, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, k...)
		out = append(out, '"', ':')
		out = appendCompactHTML(out, b[k])
	}
	return append(out, '}'), true
}

// plainKey reports a key encoding/json writes as it is: printable ASCII
// with nothing it escapes.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// oneValue reports v is one JSON value with nothing around it but
// whitespace; encoding/json fails on anything else (a nil RawMessage
// marshals as null, which the fallback writes).
func oneValue(v json.RawMessage) bool {
	if v == nil {
		return false
	}
	s := scanner{b: v}
	s.ws()
	if !s.skip(0) {
		return false
	}
	s.ws()
	return s.i == len(v)
}

const hexDigits = "0123456789abcdef"

// appendCompactHTML appends the valid JSON value src without whitespace
// outside strings, with '<', '>', '&', U+2028 and U+2029 written as \u
// escapes: what encoding/json's compaction of a marshaled RawMessage
// produces.
func appendCompactHTML(dst, src []byte) []byte {
	start := 0
	inStr, esc := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '<' || c == '>' || c == '&' {
			dst = append(append(dst, src[start:i]...), '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
			continue
		}
		if c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
			dst = append(append(dst, src[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			start = i + 3
			i += 2
			continue
		}
		switch {
		case inStr && esc:
			esc = false
		case inStr:
			esc, inStr = c == '\\', c != '"'
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}
