package vllm

// A hand scanner for the engine's stream chunks. Decoding every event with
// encoding/json was the largest single cost of relaying a token (reflection
// and an allocation per field); the router needs five facts from an event
// and the bytes themselves, so this reads just those in one pass without
// allocating. It is deliberately narrow: whenever a chunk leaves the shape
// vLLM writes (an escaped or case-folded key, a duplicate key, an error
// object, ids that are not plain digits, deep nesting, anything malformed)
// it gives up and parseEvent decodes the chunk with encoding/json, whose
// answer is the reference. FuzzFastEvent holds the two to the same result.

// maxScanDepth bounds the nesting the scanner skips; deeper input goes to
// encoding/json.
const maxScanDepth = 64

type scanner struct {
	b []byte
	i int
}

// fastEvent reads a chunk's fields; ok is false when it gave up.
func fastEvent(data []byte) (Event, bool) {
	s := scanner{b: data}
	ev := Event{Data: data}
	var seen uint8
	s.ws()
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(&seen, 1) && s.choices(&ev)
		case "usage":
			var raw []byte
			if !once(&seen, 2) || !s.raw(&raw) {
				return false
			}
			if string(raw) != "null" {
				ev.Usage = raw
			}
			return true
		case "error":
			// Only an explicit null stays here; a real error takes the
			// decoding path, which builds its message.
			return once(&seen, 4) && s.lit("null")
		}
		return !foldsTo(key, "choices", "usage", "error") && s.skip(0)
	})
	s.ws()
	return ev, ok && s.i == len(data)
}

// once marks bit in seen and reports whether it was clear: a repeated key
// is left to encoding/json (last one wins there).
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports a key encoding/json would match to one of names only by
// case folding, which the scanner leaves to it.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && string(key) != n && asciiFold(key, n) {
			return true
		}
	}
	return false
}

func asciiFold(a []byte, b string) bool {
	for i := range a {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y || (a[i] != b[i] && (x < 'a' || x > 'z')) {
			return false
		}
	}
	return true
}

func (s *scanner) choices(ev *Event) bool {
	if s.lit("null") {
		return true
	}
	return s.elements(func() bool { return s.choice(ev) })
}

// choice reads one element of choices into ev, as parseEvent's loop does.
func (s *scanner) choice(ev *Event) bool {
	var seen uint8
	var out, finished bool
	var finish []byte
	ids := -1 // absent or null: no valid list
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "text":
			return once(&seen, 1) && s.nullOr(func() bool { return s.nonEmptyString(&out) })
		case "delta":
			return once(&seen, 2) && s.delta(&out)
		case "token_ids":
			return once(&seen, 4) && s.nullOr(func() bool { return s.ids(&ids) })
		case "finish_reason":
			return once(&seen, 8) && s.nullOr(func() bool {
				finished = true
				return s.plainString(&finish)
			})
		}
		return !foldsTo(key, "text", "delta", "token_ids", "finish_reason") && s.skip(0)
	})
	if !ok || (out && ids < 0) {
		return false // an event with output but no ids is an error: decode it
	}
	if finished {
		ev.FinishReason = string(finish)
	}
	ev.Output = ev.Output || out
	ev.Tokens += max(ids, 0)
	return true
}

// delta reads a chat delta: output when any text field or a tool call is
// present and non-empty.
func (s *scanner) delta(out *bool) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return once(&seen, 1) && s.nullOr(func() bool { return s.nonEmptyString(out) })
		case "reasoning":
			return once(&seen, 2) && s.nullOr(func() bool { return s.nonEmptyString(out) })
		case "reasoning_content":
			return once(&seen, 4) && s.nullOr(func() bool { return s.nonEmptyString(out) })
		case "refusal":
			return once(&seen, 8) && s.nullOr(func() bool { return s.nonEmptyString(out) })
		case "tool_calls":
			start := s.i
			if !once(&seen, 16) || !s.skip(0) {
				return false
			}
			if raw := string(s.b[start:s.i]); raw != "null" && raw != "[]" {
				*out = true
			}
			return true
		}
		return !foldsTo(key, "content", "reasoning", "reasoning_content", "refusal", "tool_calls") && s.skip(0)
	})
}

// ids counts a token_ids list of plain non-negative integers.
func (s *scanner) ids(n *int) bool {
	count := 0
	ok := s.elements(func() bool {
		count++
		return s.plainID()
	})
	*n = count
	return ok
}

// nullOr consumes null or runs value.
func (s *scanner) nullOr(value func() bool) bool {
	return s.lit("null") || value()
}

// nonEmptyString reads a string and sets *out when it is not empty: every
// escape decodes to at least one byte, so the raw form is empty exactly
// when the decoded one is.
func (s *scanner) nonEmptyString(out *bool) bool {
	start := s.i
	if _, _, ok := s.str(); !ok {
		return false
	}
	if s.i-start > 2 {
		*out = true
	}
	return true
}

// plainString reads a string that needs no decoding (ASCII, no escapes).
func (s *scanner) plainString(dst *[]byte) bool {
	start := s.i
	escaped, wide, ok := s.str()
	if !ok || escaped || wide {
		return false
	}
	*dst = s.b[start+1 : s.i-1]
	return true
}

// object walks an object from its '{'.
func (s *scanner) object(f func(key []byte) bool) bool {
	return s.eat('{') && s.members(f)
}

// members walks an object after its '{', calling f at each value; f
// consumes the value.
func (s *scanner) members(f func(key []byte) bool) bool {
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		start := s.i
		escaped, wide, ok := s.str()
		// A key is matched as raw bytes, so one that needs decoding (or
		// Unicode case folding) is left to encoding/json.
		if !ok || escaped || wide {
			return false
		}
		key := s.b[start+1 : s.i-1]
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if !f(key) {
			return false
		}
		s.ws()
		if !s.eat(',') {
			return s.eat('}')
		}
	}
}

// elements walks an array from its '[', calling f at each element.
func (s *scanner) elements(f func() bool) bool {
	if !s.eat('[') {
		return false
	}
	s.ws()
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !f() {
			return false
		}
		s.ws()
		if !s.eat(',') {
			return s.eat(']')
		}
	}
}

// skip consumes one JSON value, checking its syntax as encoding/json does.
func (s *scanner) skip(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		s.i++
		return s.skipMembers(depth)
	case c == '[':
		return s.elements(func() bool { return s.skip(depth + 1) })
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	}
	return s.number()
}

// skipMembers consumes an object's members after its '{'; unlike members
// it takes any key.
func (s *scanner) skipMembers(depth int) bool {
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		if _, _, ok := s.str(); !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if !s.skip(depth + 1) {
			return false
		}
		s.ws()
		if !s.eat(',') {
			return s.eat('}')
		}
	}
}

// str consumes a string, reporting whether it holds escapes or non-ASCII
// bytes. Raw control characters and malformed escapes are errors.
func (s *scanner) str() (escaped, wide, ok bool) {
	if !s.eat('"') {
		return false, false, false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return escaped, wide, true
		case c < 0x20:
			return escaped, wide, false
		case c >= 0x80:
			wide = true
		case c == '\\':
			escaped = true
			if !s.escape() {
				return escaped, wide, false
			}
		}
	}
	return escaped, wide, false
}

// escape consumes the rest of an escape after its backslash.
func (s *scanner) escape() bool {
	if s.i >= len(s.b) {
		return false
	}
	c := s.b[s.i]
	s.i++
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if s.i+4 > len(s.b) {
			return false
		}
		for _, h := range s.b[s.i : s.i+4] {
			if !isHex(h) {
				return false
			}
		}
		s.i += 4
		return true
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() == 0:
		return false
	}
	if s.eat('.') && s.digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// ws passes over JSON whitespace.
func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}
