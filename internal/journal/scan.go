package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unsafe"
)

// scanner walks one JSON line without building it: the keys of an
// object in order, each value as a token, nested objects and arrays
// skipped unless asked for. It is the brief reader's tokenizer; it
// checks structure as far as it walks, and a line it cannot walk is an
// error.
type scanner struct {
	b []byte
	i int
}

// token is one scalar value: kind is '"' (raw holds the string's bytes,
// unescaped), 'n' number, 't' true, 'f' false, 'z' null, '{' or '['
// (skipped; raw is the whole value).
type token struct {
	kind byte
	raw  []byte
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r' || s.b[s.i] == '\n') {
		s.i++
	}
}

func (s *scanner) expect(c byte) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != c {
		return fmt.Errorf("not a JSON object: expected %q at byte %d", c, s.i+1)
	}
	s.i++
	return nil
}

// object calls fn for each key of the object at the cursor; fn must
// consume the value (value or fn's own walk).
func (s *scanner) object(fn func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return fmt.Errorf("not a JSON object: it ends inside")
		}
		s.i++
		switch s.b[s.i-1] {
		case ',':
		case '}':
			return nil
		default:
			return fmt.Errorf("not a JSON object: expected ',' or '}' at byte %d", s.i)
		}
	}
}

// str reads a string at the cursor and returns its content, unescaped
// when it has escapes.
func (s *scanner) str() ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, fmt.Errorf("not a JSON object: expected a string at byte %d", s.i+1)
	}
	start, escaped := s.i, false
	for j := start + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++ // the escaped byte cannot end the string
		case '"':
			s.i = j + 1
			if !escaped {
				return s.b[start+1 : j], nil
			}
			var out string
			if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
				return nil, fmt.Errorf("not a JSON object: bad string at byte %d", start+1)
			}
			return []byte(out), nil
		}
	}
	return nil, fmt.Errorf("not a JSON object: unterminated string at byte %d", start+1)
}

// value reads the value at the cursor as a token.
func (s *scanner) value() (token, error) {
	s.ws()
	if s.i >= len(s.b) {
		return token{}, fmt.Errorf("not a JSON object: a value is missing at the end")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		raw, err := s.str()
		return token{kind: '"', raw: raw}, err
	case c == '{' || c == '[':
		start := s.i
		err := s.skipNested()
		return token{kind: c, raw: s.b[start:s.i]}, err
	case c == 't' || c == 'f' || c == 'n':
		return s.literal()
	default:
		start := s.i
		for s.i < len(s.b) && numberByte[s.b[s.i]] {
			s.i++
		}
		if s.i == start {
			return token{}, fmt.Errorf("not a JSON object: unexpected %q at byte %d", c, s.i+1)
		}
		return token{kind: 'n', raw: s.b[start:s.i]}, nil
	}
}

// numberByte marks the bytes a JSON number is made of.
var numberByte = func() (t [256]bool) {
	for _, c := range []byte("+-.0123456789eE") {
		t[c] = true
	}
	return t
}()

func (s *scanner) literal() (token, error) {
	for _, l := range []struct {
		word string
		kind byte
	}{{"true", 't'}, {"false", 'f'}, {"null", 'z'}} {
		if bytes.HasPrefix(s.b[s.i:], []byte(l.word)) {
			s.i += len(l.word)
			return token{kind: l.kind}, nil
		}
	}
	return token{}, fmt.Errorf("not a JSON object: bad literal at byte %d", s.i+1)
}

// skipNested moves past the object or array at the cursor, strings
// inside included.
func (s *scanner) skipNested() error {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if _, err := s.str(); err != nil {
				return err
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
	return fmt.Errorf("not a JSON object: it ends inside a nested value")
}

// float is a number token's value, NaN for null or anything else.
func (t token) float() (float64, bool) {
	if t.kind != 'n' {
		return 0, false
	}
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(t.raw), len(t.raw)), 64)
	return v, err == nil
}

// int is a number token as an int (a float with a fraction truncates).
func (t token) int() (int, bool) {
	if v, ok := t.float(); ok {
		return int(v), true
	}
	return 0, false
}

// bytes is a string token's bytes, nil for anything else.
func (t token) bytes() []byte {
	if t.kind != '"' {
		return nil
	}
	if t.raw == nil {
		return []byte{}
	}
	return t.raw
}
