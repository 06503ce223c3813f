package sigbundle

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// ReasonOther is a refusal by sigstore-go that no rule below names; its
// message is sigstore-go's. The tests keep every case they build out of it.
const ReasonOther Reason = "refused"

// classify names a refusal. sigstore-go reports most failures as wrapped
// fmt errors whose first words name the step that failed ("failed to
// verify log inclusion: …"); the step and, inside it, the bundle and the
// trusted material tell the cases apart. The tests pin each message this
// relies on, so a sigstore-go upgrade that rewords one fails them.
func classify(err error, b *bundle.Bundle, tm root.TrustedMaterial, in Input) error {
	msg := err.Error()
	var mismatch *verify.ErrValueMismatch
	switch {
	case errors.As(err, &mismatch), strings.HasPrefix(msg, "failed to verify certificate identity"):
		return refuse(ReasonIdentity, err, "the certificate does not match --certificate-identity %q --certificate-oidc-issuer %q: %s", in.Identity, in.Issuer, lastPart(msg))
	case strings.HasPrefix(msg, "failed to verify log inclusion"):
		return tlogRefusal(err, b, tm)
	case strings.HasPrefix(msg, "failed to verify timestamps"):
		return timeRefusal(err, b, in.Now)
	case strings.HasPrefix(msg, "failed to verify leaf certificate"):
		return chainRefusal(err, b, tm)
	case strings.HasPrefix(msg, "failed to verify signed certificate timestamp"):
		return refuse(ReasonSCT, err, "the certificate has no SCT that verifies with a CT log of the trusted root: %s", lastPart(msg))
	case strings.HasPrefix(msg, "failed to verify signature") && !signsArtifact(b, in.Artifact):
		sum := sha256.Sum256(in.Artifact)
		return refuse(ReasonDigest, err, "the bundle signs sha256:%s…, but the artifact's SHA-256 is %s…", hex.EncodeToString(b.GetMessageSignature().GetMessageDigest().GetDigest())[:20], hex.EncodeToString(sum[:])[:20])
	case strings.HasPrefix(msg, "failed to verify signature") && (strings.Contains(msg, "not match") || strings.Contains(msg, "no subjects")):
		return refuse(ReasonDigest, err, "the bundle does not sign this artifact: %s", lastPart(msg))
	case strings.HasPrefix(msg, "failed to verify signature"):
		return refuse(ReasonSignature, err, "the signature does not verify with the bundle's certificate or the supplied key: %s", lastPart(msg))
	}
	return refuse(ReasonOther, err, "%s", lastPart(msg))
}

func tlogRefusal(err error, b *bundle.Bundle, tm root.TrustedMaterial) error {
	msg := err.Error()
	entries, _ := b.TlogEntries()
	switch {
	case strings.Contains(msg, "not enough verified log entries") && len(entries) == 0:
		return refuse(ReasonTlogMissing, err, "the bundle has no transparency-log entry; a keyless bundle must be logged in Rekor")
	case strings.Contains(msg, "not enough verified log entries") && !anyKnownLog(entries, tm):
		return refuse(ReasonTlogKey, err, "the bundle's log entry is from log %s, which the trusted root does not name; pass the trusted root of the Sigstore instance that logged it", logIDs(entries))
	case strings.Contains(msg, "not enough verified log entries"):
		return refuse(ReasonTlogPromise, err, "the log entry's signed entry timestamp does not verify with the trusted root's key for log %s: the entry was altered", logIDs(entries))
	case strings.Contains(msg, "integrated time outside certificate validity"):
		return refuse(ReasonExpired, err, "the certificate%s was not valid at the log's integrated time %s", validity(leafOf(b)), integratedTimes(entries))
	case strings.Contains(msg, "transparency log"), strings.Contains(msg, "duplicate tlog entries"), strings.Contains(msg, "too many tlog entries"):
		return refuse(ReasonTlogEntry, err, "the log entry does not record this bundle's signature: %s", lastPart(msg))
	}
	detail := lastPart(msg)
	if strings.Contains(msg, "calculated root") {
		detail = "the proof's hashes do not lead to its root hash"
	}
	return refuse(ReasonInclusionProof, err, "the log entry's inclusion proof does not verify: %s", detail)
}

// timeRefusal: no verified time. An expired certificate is the usual
// reason a caller meets it, so it is named when the clock says so.
func timeRefusal(err error, b *bundle.Bundle, now time.Time) error {
	leaf := leafOf(b)
	if leaf != nil && !now.IsZero() && now.After(leaf.NotAfter) {
		return refuse(ReasonExpired, err, "the certificate%s has expired, and no verified timestamp (a log's signed entry timestamp or an RFC 3161 timestamp) shows it was signed while valid", validity(leaf))
	}
	detail := lastPart(err.Error())
	if strings.Contains(detail, "%!w(<nil>)") { // sigstore-go wraps a nil error when there was no timestamp at all
		detail = "the bundle carries none"
	}
	return refuse(ReasonTimestamp, err, "no verified timestamp (a log's signed entry timestamp or an RFC 3161 timestamp from an authority of the trusted root): %s", detail)
}

// chainRefusal: sigstore-go's certificate check failed at some verified
// time; it is an expiry when one of those times is outside the leaf's
// validity, and an untrusted chain otherwise.
func chainRefusal(err error, b *bundle.Bundle, tm root.TrustedMaterial) error {
	leaf := leafOf(b)
	if leaf == nil {
		return refuse(ReasonUntrusted, err, "%v", err)
	}
	var times []time.Time
	entries, _ := b.TlogEntries()
	for _, e := range entries {
		if e.HasInclusionPromise() {
			times = append(times, e.IntegratedTime())
		}
	}
	stamps, _, _ := verify.VerifySignedTimestamp(b, tm)
	for _, s := range stamps {
		times = append(times, s.Time)
	}
	for _, t := range times {
		if t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) {
			return refuse(ReasonExpired, err, "the certificate%s was not valid at the verified signing time %s", validity(leaf), t.UTC().Format(time.RFC3339))
		}
	}
	return refuse(ReasonUntrusted, err, "the certificate%s does not chain to a certificate authority of the trusted root that was valid when it was signed", validity(leaf))
}

// signsArtifact is false when a message signature's digest is not the
// artifact's: sigstore-go then reports the signature as invalid, since it
// checks the signature over the artifact's bytes.
func signsArtifact(b *bundle.Bundle, artifact []byte) bool {
	ms := b.GetMessageSignature()
	if ms == nil || artifact == nil || ms.GetMessageDigest().GetAlgorithm() != protocommon.HashAlgorithm_SHA2_256 {
		return true
	}
	sum := sha256.Sum256(artifact)
	return bytes.Equal(sum[:], ms.GetMessageDigest().GetDigest())
}

func leafOf(b *bundle.Bundle) *x509.Certificate {
	vc, err := b.VerificationContent()
	if err != nil {
		return nil
	}
	return vc.Certificate()
}

// validity is " for <SAN> (valid <from> to <to>)" for messages.
func validity(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	san := "(no SAN)"
	if s, err := certificate.SummarizeCertificate(c); err == nil {
		san = s.SubjectAlternativeName
	}
	return " for " + san + " (valid " + c.NotBefore.UTC().Format(time.RFC3339) + " to " + c.NotAfter.UTC().Format(time.RFC3339) + ")"
}

func anyKnownLog(entries []*tlogEntry, tm root.TrustedMaterial) bool {
	logs := tm.RekorLogs()
	for _, e := range entries {
		if _, ok := logs[hex.EncodeToString([]byte(e.LogKeyID()))]; ok {
			return true
		}
	}
	return false
}

func logIDs(entries []*tlogEntry) string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, hex.EncodeToString([]byte(e.LogKeyID())))
	}
	return strings.Join(ids, ",")
}

func integratedTimes(entries []*tlogEntry) string {
	var ts []string
	for _, e := range entries {
		ts = append(ts, e.IntegratedTime().UTC().Format(time.RFC3339))
	}
	return strings.Join(ts, ",")
}

// lastPart is the innermost of sigstore-go's "step: step: cause" chain,
// on one line.
func lastPart(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}
