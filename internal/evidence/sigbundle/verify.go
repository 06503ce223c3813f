// Package sigbundle verifies Sigstore bundles offline with sigstore-go, the
// Sigstore project's Go verifier: Rekor v1 promises and inclusion proofs,
// Rekor v2 entries with signed checkpoints, RFC 3161 timestamps,
// certificate transparency SCTs, keyless (Fulcio) and public-key bundles,
// against a trusted_root.json the caller supplies. The accept-or-refuse
// decision is sigstore-go's alone; this package chooses the policy, names
// each refusal with a stable Reason and turns the result into narwhal's
// output document. Nothing here uses the network.
package sigbundle

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Input is one verification.
type Input struct {
	Bundle      []byte  // Sigstore bundle JSON, v0.1 to v0.3
	TrustedRoot []byte  // trusted_root.json (application/vnd.dev.sigstore.trustedroot+json;version=0.1)
	Artifact    []byte  // the artifact's bytes; nil when Digest is given instead
	Digest      *Digest // the artifact's digest, for callers without its bytes
	Identity    string  // exact certificate SAN (e-mail or URI); empty accepts any, and the result names it
	Issuer      string  // exact OIDC issuer; empty accepts any
	// Key, when set, is the public key a public-key bundle must be signed
	// with; such a bundle has no certificate, so Identity and Issuer must be
	// empty.
	Key crypto.PublicKey
	// Now only explains a refusal (an expired certificate with no verified
	// timestamp); it never decides one, since sigstore-go checks the
	// certificate at the verified signing times, not at the wall clock.
	Now time.Time
}

// Digest is an artifact digest: algorithm "sha256", "sha384" or "sha512".
type Digest struct {
	Algorithm string
	Value     []byte
}

// Result is what a verified bundle proves (the verify-bundle document).
type Result struct {
	Verified      bool        `json:"verified"`
	Digest        string      `json:"digest"`        // 1220… (SHA-256) of the artifact, or algorithm:hex when only a digest was given
	Identity      string      `json:"identity"`      // certificate SAN; empty for a public-key bundle
	Issuer        string      `json:"issuer"`        // OIDC issuer; empty for a public-key bundle
	Key           string      `json:"key,omitempty"` // hex SHA-256 of the PKIX public key of a public-key bundle
	SignedAt      string      `json:"signed_at"`     // RFC 3339, the first verified timestamp
	TimeSource    string      `json:"time_source"`   // "tlog:<log index>" or "tsa:<authority URI>"
	Timestamps    []Timestamp `json:"timestamps"`    // every verified timestamp the certificate was checked at
	Content       string      `json:"content"`       // "message_signature" or "dsse"
	Log           string      `json:"log"`           // "rekor_v1", "rekor_v2" or "" when not logged
	BundleVersion string      `json:"bundle_version"`
}

// Timestamp is one verified time: from a log's signed promise ("tlog") or
// an RFC 3161 timestamp authority ("tsa").
type Timestamp struct {
	Source string `json:"source"`
	URI    string `json:"uri"`
	Time   string `json:"time"`
}

// Verify checks in.Bundle with sigstore-go against in.TrustedRoot. It
// returns a *Refusal when verification ran and said no, and another error
// when the input cannot be read.
func Verify(in Input) (Result, error) {
	if in.Key != nil && (in.Identity != "" || in.Issuer != "") {
		return Result{}, errors.New("a public key and a certificate identity exclude each other: a public-key bundle has no certificate")
	}
	tr, err := root.NewTrustedRootFromJSON(in.TrustedRoot)
	if err != nil {
		return Result{}, fmt.Errorf("trusted root: %w", err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(in.Bundle); err != nil {
		return Result{}, parseError(err)
	}
	if err := keyMatchesContent(&b, in.Key != nil); err != nil {
		return Result{}, err
	}
	tm, err := material(tr, in.Key)
	if err != nil {
		return Result{}, err
	}
	v, err := verify.NewVerifier(tm, verifierOptions(tr, &b, in.Key != nil)...)
	if err != nil {
		return Result{}, fmt.Errorf("verifier: %w", err)
	}
	pol, err := policy(in)
	if err != nil {
		return Result{}, err
	}
	res, err := v.Verify(&b, pol)
	if err != nil {
		return Result{}, classify(err, &b, tm, in)
	}
	return result(res, &b, in)
}

// parseError makes sigstore-go's bundle validation a refusal where it
// refuses a security property (a v0.2+ bundle without an inclusion proof,
// a v0.1 one without a promise) and bad input otherwise.
func parseError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "inclusion proof missing"):
		return refuse(ReasonInclusionProof, err, "the bundle's log entry has no inclusion proof, which bundles v0.2 and later must carry (%v)", err)
	case strings.Contains(msg, "inclusion promises missing"):
		return refuse(ReasonTlogPromise, err, "the v0.1 bundle's log entry has no signed entry timestamp (%v)", err)
	}
	return fmt.Errorf("bundle: %w; want a Sigstore bundle (application/vnd.dev.sigstore.bundle.v0.3+json)", err)
}

// keyMatchesContent refuses a public-key bundle without --key and a
// certificate bundle with one before any policy applies, so the refusal
// says which flag is missing instead of which check a wrong policy failed.
func keyMatchesContent(b *bundle.Bundle, keyed bool) error {
	vc, err := b.VerificationContent()
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	switch {
	case keyed && vc.Certificate() != nil:
		return refuse(ReasonKey, nil, "--key was given but the bundle is signed with a certificate; verify it with --certificate-identity and --certificate-oidc-issuer instead")
	case !keyed && vc.Certificate() == nil:
		return refuse(ReasonKey, nil, "the bundle is signed with a public key, not a certificate; pass that key with --key")
	}
	return nil
}

// material adds the supplied key, if any, to the trusted root: sigstore-go
// asks trusted material for a public-key bundle's key by its hint.
func material(tr *root.TrustedRoot, key crypto.PublicKey) (root.TrustedMaterial, error) {
	if key == nil {
		return tr, nil
	}
	sv, err := signature.LoadDefaultVerifier(key)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	k := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	byHint := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return k, nil })
	return root.TrustedMaterialCollection{tr, byHint}, nil
}

// verifierOptions is narwhal's policy. A keyless bundle needs a verified
// log entry and a verified time (a log promise or an RFC 3161 timestamp)
// at which its short-lived certificate was valid, and an SCT when the
// trusted root names a CT log (as Sigstore's public instance does). A
// public-key bundle needs a verified time; its log entries, if it has
// any, must verify too.
func verifierOptions(tr *root.TrustedRoot, b *bundle.Bundle, keyed bool) []verify.VerifierOption {
	opts := []verify.VerifierOption{verify.WithObserverTimestamps(1)}
	entries, _ := b.TlogEntries()
	if !keyed || len(entries) > 0 {
		opts = append(opts, verify.WithTransparencyLog(1))
	}
	if !keyed && len(tr.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	return opts
}

func policy(in Input) (verify.PolicyBuilder, error) {
	art := verify.WithArtifact(bytes.NewReader(in.Artifact))
	if in.Artifact == nil {
		if in.Digest == nil {
			return verify.PolicyBuilder{}, errors.New("no artifact: pass its bytes or its digest")
		}
		art = verify.WithArtifactDigest(in.Digest.Algorithm, in.Digest.Value)
	}
	if in.Key != nil {
		return verify.NewPolicy(art, verify.WithKey()), nil
	}
	if in.Identity == "" && in.Issuer == "" {
		// The result still names the signer; the caller decides on it.
		return verify.NewPolicy(art, verify.WithoutIdentitiesUnsafe()), nil
	}
	id, err := verify.NewShortCertificateIdentity(in.Issuer, anyIfEmpty(in.Issuer), in.Identity, anyIfEmpty(in.Identity))
	if err != nil {
		return verify.PolicyBuilder{}, fmt.Errorf("certificate identity: %w", err)
	}
	return verify.NewPolicy(art, verify.WithCertificateIdentity(id)), nil
}

// anyIfEmpty is the regular expression that lets an unpinned half of the
// identity (SAN or issuer) match anything; sigstore-go wants both halves.
func anyIfEmpty(s string) string {
	if s == "" {
		return ".*"
	}
	return ""
}

func keyID(k crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
