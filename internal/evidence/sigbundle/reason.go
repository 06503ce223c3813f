package sigbundle

import "fmt"

// Reason names why a bundle was refused. The strings are a stable
// interface (scripts match on them); docs/evidence.md lists them.
type Reason string

const (
	ReasonTlogMissing    Reason = "tlog_missing"        // no transparency-log entry, and one is required
	ReasonTlogKey        Reason = "tlog_key"            // the entry's log is not in the trusted root
	ReasonTlogPromise    Reason = "tlog_promise"        // the signed entry timestamp does not verify with the trusted log key
	ReasonInclusionProof Reason = "inclusion_proof"     // the inclusion proof is missing or does not verify against its signed checkpoint
	ReasonTlogEntry      Reason = "tlog_entry"          // the log entry records another signature, key or digest
	ReasonTimestamp      Reason = "timestamp"           // no verified timestamp, or an RFC 3161 timestamp does not verify
	ReasonExpired        Reason = "certificate_expired" // the certificate was not valid at any verified signing time
	ReasonUntrusted      Reason = "untrusted"           // the certificate does not chain to a certificate authority of the trusted root
	ReasonSCT            Reason = "sct"                 // the certificate lacks a verified SCT from a CT log of the trusted root
	ReasonIdentity       Reason = "identity_mismatch"   // the certificate names another identity or issuer
	ReasonSignature      Reason = "altered"             // the signature does not verify with the certificate's or supplied key
	ReasonDigest         Reason = "digest_mismatch"     // the artifact is not what was signed
	ReasonKey            Reason = "key_mismatch"        // a certificate where a key was expected, or the reverse
)

// Refusal is a verification that ran and said no (CLI exit 1); any other
// error is bad input (exit 2). Cause is sigstore-go's own error, kept for
// errors.Is/As and for the message.
type Refusal struct {
	Reason Reason
	Detail string
	Cause  error
}

func (r *Refusal) Error() string { return "refused (" + string(r.Reason) + "): " + r.Detail }

func (r *Refusal) Unwrap() error { return r.Cause }

func refuse(r Reason, cause error, format string, args ...any) *Refusal {
	return &Refusal{Reason: r, Detail: fmt.Sprintf(format, args...), Cause: cause}
}
