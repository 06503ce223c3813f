package canon

import (
	"errors"
	"fmt"
)

// Code classifies why input was refused. The values are stable: they appear
// in published rejection vectors and in CLI output.
type Code string

const (
	CodeSyntax           Code = "syntax"
	CodeInvalidUTF8      Code = "invalid_utf8"
	CodeLoneSurrogate    Code = "lone_surrogate"
	CodeDuplicateKey     Code = "duplicate_key"
	CodeIntegerRange     Code = "integer_out_of_range"
	CodeNumberRange      Code = "number_out_of_range"
	CodeTooDeep          Code = "too_deep"
	CodeNotCanonical     Code = "not_canonical"
	CodeUnsupportedValue Code = "unsupported_value"
)

// Error is a refusal with its reason and, where known, the byte offset in
// the input (-1 when there is none).
type Error struct {
	Code   Code
	Offset int
	Path   string // JSON path of the value, when known (Marshal)
	Msg    string
}

func (e *Error) Error() string {
	where := ""
	switch {
	case e.Path != "":
		where = " at " + e.Path
	case e.Offset >= 0:
		where = fmt.Sprintf(" at byte %d", e.Offset)
	}
	return fmt.Sprintf("canon: %s%s: %s", e.Code, where, e.Msg)
}

// Is lets errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the refusal code of err, or "" when err is not a canon error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
