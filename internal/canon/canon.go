// Package canon is narwhal's canonical form (ADR-006, INV-43): RFC 8785 JSON
// Canonicalization Scheme bytes and their SHA-256 multihash digest.
//
// Canonicalization is done by github.com/gowebpki/jcs. In front of it sits
// our own strict check (check.go), because identity must never depend on a
// value a parser silently changed: invalid UTF-8, lone surrogates,
// duplicate keys, integers beyond 2^53 and numbers outside the double range
// are rejected with a typed *Error instead of being repaired.
package canon

import (
	"bytes"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns the RFC 8785 form of the JSON document in b, after the
// strict input checks. The result has no trailing newline.
func Canonicalize(b []byte) ([]byte, error) {
	if err := check(b); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(b)
	if err != nil {
		// The strict check accepts a subset of what jcs accepts, so this is
		// a disagreement between the two parsers, not a user error we know.
		return nil, &Error{Code: CodeSyntax, Offset: -1, Msg: "canonicalizer refused the document: " + err.Error()}
	}
	return out, nil
}

// VerifyCanonical returns nil when b is exactly the canonical form of
// itself. Anything else (whitespace, key order, number or string spelling)
// is an *Error with CodeNotCanonical: such bytes are rejected, never
// digested and never repaired (ADR-006: "a digest computed from an
// uncanonicalized encoding is rejected rather than stored").
func VerifyCanonical(b []byte) error {
	c, err := Canonicalize(b)
	if err != nil {
		return err
	}
	if bytes.Equal(b, c) {
		return nil
	}
	at := firstDifference(b, c)
	return &Error{
		Code:   CodeNotCanonical,
		Offset: at,
		Msg:    fmt.Sprintf("bytes are not in RFC 8785 canonical form (first difference at byte %d); canonicalize first with 'narwhal evidence canon'", at),
	}
}

func firstDifference(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
