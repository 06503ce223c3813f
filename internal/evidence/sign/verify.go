package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Reason classifies a refusal so callers and tests can tell the cases
// apart without parsing messages.
type Reason string

const (
	ReasonWrongKey Reason = "wrong_key"       // signed by a key other than the one supplied
	ReasonAltered  Reason = "altered"         // the signature does not cover these payload bytes
	ReasonDigest   Reason = "digest_mismatch" // the artifact is not what was signed
	ReasonPayload  Reason = "bad_payload"     // the signed payload is not a usable Statement
)

// Refusal is a verification that ran and said no (CLI exit 1); any other
// error is bad input (exit 2).
type Refusal struct {
	Reason Reason
	Detail string
}

func (r *Refusal) Error() string { return "refused (" + string(r.Reason) + "): " + r.Detail }

func refuse(r Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Verify checks env against pub and returns the signed Statement. It
// refuses when no signature verifies, naming the key ids involved.
func Verify(env Envelope, payload []byte, pub PublicKey) (Statement, error) {
	msg := PAE(env.PayloadType, payload)
	var ids []string
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			return Statement{}, fmt.Errorf("envelope: signature is not base64: %w", err)
		}
		if ed25519.Verify(pub.Key, msg, sig) {
			return parseStatement(env.PayloadType, payload)
		}
		ids = append(ids, s.KeyID)
	}
	want := pub.ID()
	for _, id := range ids {
		if id == want {
			return Statement{}, refuse(ReasonAltered, "the signature by key %s does not cover this payload: the envelope was altered after signing", short(want))
		}
	}
	return Statement{}, refuse(ReasonWrongKey, "envelope is signed by key %s, not by the supplied key %s", short(strings.Join(ids, ",")), short(want))
}

// parseStatement reads a verified payload and checks a record predicate
// hashes to its subject, so a signed envelope cannot carry one record
// under another's digest.
func parseStatement(payloadType string, payload []byte) (Statement, error) {
	if payloadType != PayloadType {
		return Statement{}, refuse(ReasonPayload, "payloadType %q: want %q", payloadType, PayloadType)
	}
	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return Statement{}, refuse(ReasonPayload, "payload is not an in-toto Statement: %v", err)
	}
	if st.Type != StatementType || len(st.Subject) == 0 {
		return Statement{}, refuse(ReasonPayload, "payload _type %q with %d subjects: want %q with at least one", st.Type, len(st.Subject), StatementType)
	}
	if st.PredicateType != RecordPredicateType {
		return st, nil
	}
	var p RecordPredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		return Statement{}, refuse(ReasonPayload, "record predicate: %v", err)
	}
	d, err := canon.VerifiedDigest(p.Record)
	if err != nil || !st.Covers(d) {
		return Statement{}, refuse(ReasonDigest, "the signed record does not hash to the signed subject %s", short(strings.Join(st.SubjectDigests(), ",")))
	}
	return st, nil
}

// CheckCovers refuses when digest is not a subject of st: the record on
// disk was changed since it was signed, or the envelope is for another one.
func CheckCovers(st Statement, digest string) error {
	if st.Covers(digest) {
		return nil
	}
	return refuse(ReasonDigest, "the record hashes to %s, which the envelope does not sign (it signs %s): the record was changed after signing or the envelope belongs to another record", short(digest), short(strings.Join(st.SubjectDigests(), ",")))
}

// short trims long hex for one-line messages while keeping it findable.
func short(s string) string {
	if len(s) > 20 && !strings.Contains(s, ",") {
		return s[:20] + "…"
	}
	return s
}
