package canon

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

// maxExactInteger is 2^53: every integer up to it in magnitude is exactly a
// double, so every JCS implementation prints it the same way.
const maxExactInteger = 1 << 53

// check validates b as one strict I-JSON document (RFC 7493) without
// building a tree: the canonicalizer parses it again, this pass only says
// no, with a reason and a byte offset.
func check(b []byte) error {
	s := &scanner{b: b}
	s.space()
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.i != len(b) {
		return s.fail(CodeSyntax, "unexpected content after the JSON value; a document holds exactly one value")
	}
	return nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(c Code, msg string) *Error {
	return &Error{Code: c, Offset: s.i, Msg: msg}
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.fail(CodeSyntax, "unexpected end of input; expected a JSON value")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.literal()
	}
}

func (s *scanner) literal() error {
	for _, lit := range []string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return nil
		}
	}
	if r, size := utf8.DecodeRune(s.b[s.i:]); r == utf8.RuneError && size <= 1 {
		return s.fail(CodeInvalidUTF8, "input is not valid UTF-8; re-encode the file as UTF-8")
	}
	return s.fail(CodeSyntax, "unexpected character; expected a JSON value")
}

func (s *scanner) object(depth int) error {
	if depth > maxDepth {
		return s.fail(CodeTooDeep, "nesting deeper than 1000 levels; flatten the document")
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	seen := map[string]bool{}
	for {
		s.space()
		at := s.i
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail(CodeSyntax, "expected a quoted object key")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if seen[key] {
			return &Error{Code: CodeDuplicateKey, Offset: at, Msg: "key " + strconv.Quote(key) + " appears twice in one object; keep one of them"}
		}
		seen[key] = true
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail(CodeSyntax, "expected ':' after an object key")
		}
		s.i++
		s.space()
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if done, err := s.next('}'); done || err != nil {
			return err
		}
	}
}

func (s *scanner) array(depth int) error {
	if depth > maxDepth {
		return s.fail(CodeTooDeep, "nesting deeper than 1000 levels; flatten the document")
	}
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if done, err := s.next(']'); done || err != nil {
			return err
		}
	}
}

// next consumes ',' (more to come) or the closing byte (done).
func (s *scanner) next(closing byte) (bool, error) {
	if s.i >= len(s.b) {
		return false, s.fail(CodeSyntax, "unexpected end of input inside a container")
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, nil
	case closing:
		s.i++
		return true, nil
	}
	return false, s.fail(CodeSyntax, "expected ',' or '"+string(closing)+"'")
}

// str consumes a string and returns its decoded value, so duplicate keys
// are found whatever escapes spell them.
func (s *scanner) str() (string, error) {
	s.i++ // opening quote
	var out []rune
	for {
		if s.i >= len(s.b) {
			return "", s.fail(CodeSyntax, "unterminated string")
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), nil
		case c == '\\':
			r, err := s.escape()
			if err != nil {
				return "", err
			}
			out = append(out, r)
		case c < 0x20:
			return "", s.fail(CodeSyntax, "raw control character in a string; write it as a \\u escape")
		case c < utf8.RuneSelf:
			out = append(out, rune(c))
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", s.fail(CodeInvalidUTF8, "string is not valid UTF-8; re-encode the file as UTF-8")
			}
			out = append(out, r)
			s.i += size
		}
	}
}

func (s *scanner) escape() (rune, error) {
	if s.i+1 >= len(s.b) {
		return 0, s.fail(CodeSyntax, "unterminated escape")
	}
	c := s.b[s.i+1]
	if r, ok := simpleEscapes[c]; ok {
		s.i += 2
		return r, nil
	}
	if c != 'u' {
		return 0, s.fail(CodeSyntax, "unknown escape \\"+string(rune(c)))
	}
	at := s.i
	hi, err := s.hex4()
	if err != nil {
		return 0, err
	}
	switch {
	case utf16.IsSurrogate(hi) && hi >= 0xDC00:
		return 0, &Error{Code: CodeLoneSurrogate, Offset: at, Msg: "low surrogate escape without a high surrogate before it; strings must be valid Unicode"}
	case !utf16.IsSurrogate(hi):
		return hi, nil
	}
	lowAt := s.i
	if s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
		return 0, &Error{Code: CodeLoneSurrogate, Offset: at, Msg: "high surrogate escape without a low surrogate after it; strings must be valid Unicode"}
	}
	lo, err := s.hex4()
	if err != nil {
		return 0, err
	}
	r := utf16.DecodeRune(hi, lo)
	if r == utf8.RuneError {
		return 0, &Error{Code: CodeLoneSurrogate, Offset: lowAt, Msg: "high surrogate escape followed by a non-low-surrogate; strings must be valid Unicode"}
	}
	return r, nil
}

var simpleEscapes = map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 consumes \uXXXX and returns the code unit.
func (s *scanner) hex4() (rune, error) {
	if s.i+6 > len(s.b) {
		return 0, s.fail(CodeSyntax, "truncated \\u escape")
	}
	v, err := strconv.ParseUint(string(s.b[s.i+2:s.i+6]), 16, 16)
	if err != nil {
		return 0, s.fail(CodeSyntax, "\\u escape needs four hex digits")
	}
	s.i += 6
	return rune(v), nil
}
