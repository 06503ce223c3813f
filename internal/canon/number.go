package canon

import (
	"errors"
	"math"
	"strconv"
)

// number consumes a JSON number and refuses values that a double-based
// canonicalizer would silently change: integers beyond 2^53 (they round)
// and magnitudes beyond the double range (they become infinite).
func (s *scanner) number() error {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	intStart := s.i
	switch {
	case s.peek() == '0':
		s.i++
		if c := s.peek(); c >= '0' && c <= '9' {
			return &Error{Code: CodeSyntax, Offset: start, Msg: "leading zeros are not allowed in numbers"}
		}
	case s.peek() >= '1' && s.peek() <= '9':
		s.digits()
	default:
		return s.fail(CodeSyntax, "a number needs digits after '-'")
	}
	intPart := string(s.b[intStart:s.i])
	fracAllZero := true
	if s.peek() == '.' {
		s.i++
		from := s.i
		if s.digits() == 0 {
			return s.fail(CodeSyntax, "a number needs digits after '.'")
		}
		for _, c := range s.b[from:s.i] {
			fracAllZero = fracAllZero && c == '0'
		}
	}
	hasExp := false
	if c := s.peek(); c == 'e' || c == 'E' {
		hasExp = true
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail(CodeSyntax, "a number needs digits in its exponent")
		}
	}
	return s.numberRange(start, intPart, !hasExp && fracAllZero)
}

func (s *scanner) numberRange(start int, intPart string, integral bool) error {
	text := string(s.b[start:s.i])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
		return &Error{Code: CodeNumberRange, Offset: start, Msg: "number " + short(text) + " is outside the IEEE-754 double range"}
	}
	if integral && exceedsExact(intPart) {
		return &Error{Code: CodeIntegerRange, Offset: start, Msg: "integer " + short(text) + " exceeds 2^53 in magnitude and may already be rounded; write it as a string"}
	}
	// RFC 8785 prints magnitudes in (2^53, 1e21) as integers beyond 2^53,
	// which the rule above refuses; refusing them here too keeps every
	// canonical output acceptable as input.
	if a := math.Abs(f); a > maxExactInteger && a < 1e21 {
		return &Error{Code: CodeIntegerRange, Offset: start, Msg: "number " + short(text) + " lies between 2^53 and 1e21, where its canonical form is an integer beyond 2^53; write it as a string"}
	}
	return nil
}

// exceedsExact reports whether the decimal digits denote a value above 2^53.
func exceedsExact(digits string) bool {
	if len(digits) > 16 {
		return true
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return err != nil || v > maxExactInteger
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
