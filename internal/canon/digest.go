package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// DigestPrefix is the multihash header of a SHA-256 digest: function code
// 0x12 (sha2-256), length 0x20 (32 bytes), written as hex. Carrying it
// records the algorithm instead of assuming it.
const DigestPrefix = "1220"

// DigestLen is the length of a digest string: prefix plus 64 hex digits.
const DigestLen = len(DigestPrefix) + 2*sha256.Size

// Digest returns "1220" + lower-case hex SHA-256 of canonical. The caller
// must pass canonical bytes (from Canonicalize or Marshal); bytes from
// outside go through VerifiedDigest instead.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// VerifiedDigest digests b only if b is already canonical: a digest of
// uncanonical bytes is refused, never computed (INV-43).
func VerifiedDigest(b []byte) (string, error) {
	if err := VerifyCanonical(b); err != nil {
		return "", err
	}
	return Digest(b), nil
}

// ParseDigest checks the digest string form and returns the bare SHA-256.
// Only the stored form is accepted: "1220" then 64 lower-case hex digits.
func ParseDigest(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(s) != DigestLen || s[:len(DigestPrefix)] != DigestPrefix {
		return sum, fmt.Errorf("digest %q: want %q followed by 64 lower-case hex digits (a SHA-256 multihash)", short(s), DigestPrefix)
	}
	for i := len(DigestPrefix); i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return sum, fmt.Errorf("digest %q: character %q at %d is not lower-case hex", short(s), c, i)
		}
	}
	if _, err := hex.Decode(sum[:], []byte(s[len(DigestPrefix):])); err != nil {
		return sum, fmt.Errorf("digest %q: %w", short(s), err)
	}
	return sum, nil
}

// IsDigest reports whether s is a well-formed digest string.
func IsDigest(s string) bool {
	_, err := ParseDigest(s)
	return err == nil
}
