package artifact

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// scanner is a small strict JSON reader for safetensors headers and
// index files: it rejects duplicate keys (encoding/json keeps the last),
// reads non-negative integers exactly, and reports the byte offset of
// the first problem. Headers of large checkpoints hold tens of thousands
// of tensors, so it reads in one pass without building a generic tree.
type scanner struct {
	b []byte
	i int
	// slab backs the integer arrays read (shapes), so a header of many
	// tensors costs a few allocations, not one per shape.
	slab []int64
}

const maxScanDepth = 64

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("at byte %d: %s", e.off, e.msg) }

func (s *scanner) fail(format string, a ...any) error {
	return &syntaxError{off: s.i, msg: fmt.Sprintf(format, a...)}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.b) {
			return s.fail("unexpected end, want %q", c)
		}
		return s.fail("found %q, want %q", s.b[s.i], c)
	}
	s.i++
	return nil
}

// object calls member for each key, refusing duplicates.
func (s *scanner) object(member func(key string) error) error {
	// Most objects (tensor entries) have three keys: a slice is cheaper
	// than a map until there are many.
	var few []string
	var many map[string]bool
	return s.members(nil, func(k string, at int) error {
		if many != nil {
			if many[k] {
				return s.dupAt(k, at)
			}
			many[k] = true
		} else {
			if slices.Contains(few, k) {
				return s.dupAt(k, at)
			}
			if few = append(few, k); len(few) > 16 {
				many = make(map[string]bool, 64)
				for _, f := range few {
					many[f] = true
				}
			}
		}
		return member(k)
	})
}

func (s *scanner) dupAt(k string, at int) error {
	return &syntaxError{off: at, msg: fmt.Sprintf("duplicate key %q", k)}
}

// members calls member for each key of an object with the key's offset;
// the caller refuses duplicates (large objects keep their own map of
// what they read, so a second one is not needed).
func (s *scanner) members(pool map[string]string, member func(key string, at int) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		at := s.i
		var k string
		var err error
		if pool != nil {
			k, err = s.interned(pool)
		} else {
			k, err = s.str()
		}
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(k, at); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("want ',' or '}' after a member")
		}
	}
}

// array calls elem for each element.
func (s *scanner) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("want ',' or ']' after an element")
		}
	}
}

// interned returns the string of a short value that repeats across a
// header (dtypes, shard names) without allocating it each time.
func (s *scanner) interned(pool map[string]string) (string, error) {
	if s.peek() != '"' {
		return s.str()
	}
	start := s.i + 1
	end := start
	for end < len(s.b) && s.b[end] != '"' && s.b[end] != '\\' && s.b[end] >= 0x20 {
		end++
	}
	if end < len(s.b) && s.b[end] == '"' {
		if v, ok := pool[string(s.b[start:end])]; ok {
			s.i = end + 1
			return v, nil
		}
	}
	v, err := s.str()
	if err == nil {
		pool[v] = v
	}
	return v, err
}

func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start, escaped := s.i, false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !utf8.Valid(raw) {
				return "", &syntaxError{off: start, msg: "string is not valid UTF-8"}
			}
			if !escaped {
				return string(raw), nil
			}
			var out string
			if err := json.Unmarshal(s.b[start-1:s.i], &out); err != nil {
				return "", &syntaxError{off: start, msg: "bad string escape"}
			}
			return out, nil
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return "", s.fail("control character in string")
		default:
			s.i++
		}
	}
	return "", s.fail("unterminated string")
}

// uint reads a non-negative JSON integer without fraction or exponent.
func (s *scanner) uint() (int64, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start {
		return 0, s.fail("want a non-negative integer")
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, &syntaxError{off: start, msg: "want an integer, found a fraction or exponent"}
	}
	if s.b[start] == '0' && s.i-start > 1 {
		return 0, &syntaxError{off: start, msg: "integer with a leading zero"}
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil || n > 1<<53 {
		return 0, &syntaxError{off: start, msg: "integer beyond 2^53"}
	}
	return n, nil
}

// uints reads an array of non-negative integers into the slab.
func (s *scanner) uints() ([]int64, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	start := len(s.slab)
	if s.peek() == ']' {
		s.i++
		return []int64{}, nil
	}
	for {
		d, err := s.uint()
		if err != nil {
			return nil, err
		}
		s.slab = append(s.slab, d)
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return s.slab[start:len(s.slab):len(s.slab)], nil
		default:
			return nil, s.fail("want ',' or ']' after an element")
		}
	}
}

// skip reads and discards any JSON value, still refusing duplicate keys.
func (s *scanner) skip(depth int) error {
	if depth > maxScanDepth {
		return s.fail("nesting deeper than %d", maxScanDepth)
	}
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(string) error { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() error { return s.skip(depth + 1) })
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return nil
			}
		}
		return s.fail("not a JSON value")
	}
}

func (s *scanner) number() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return s.fail("malformed number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.fail("malformed number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("malformed number")
		}
	}
	if _, err := strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil {
		return &syntaxError{off: start, msg: "number out of range"}
	}
	return nil
}

// end requires nothing but whitespace after the value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("unexpected content after the JSON value")
	}
	return nil
}
