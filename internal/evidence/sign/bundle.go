package sign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Bundle is the part of a Sigstore bundle (v0.1–v0.3) this verifier reads.
type Bundle struct {
	MediaType            string               `json:"mediaType"`
	VerificationMaterial VerificationMaterial `json:"verificationMaterial"`
	MessageSignature     *MessageSignature    `json:"messageSignature"`
	DSSEEnvelope         *Envelope            `json:"dsseEnvelope"`
}

// VerificationMaterial holds the signing certificate (v0.3 "certificate",
// older "x509CertificateChain") and the transparency-log entries.
type VerificationMaterial struct {
	Certificate          *RawBytes   `json:"certificate"`
	X509CertificateChain *CertChain  `json:"x509CertificateChain"`
	TlogEntries          []TlogEntry `json:"tlogEntries"`
}

// MessageSignature is a signature over an artifact's SHA-256 digest.
type MessageSignature struct {
	MessageDigest struct {
		Algorithm string `json:"algorithm"`
		Digest    string `json:"digest"` // base64
	} `json:"messageDigest"`
	Signature string `json:"signature"` // base64 ASN.1 ECDSA
}

// TlogEntry is a Rekor entry; protobuf JSON writes int64 as strings.
type TlogEntry struct {
	LogIndex         flexInt `json:"logIndex"`
	LogID            LogID   `json:"logId"`
	IntegratedTime   flexInt `json:"integratedTime"`
	InclusionPromise *struct {
		SignedEntryTimestamp string `json:"signedEntryTimestamp"`
	} `json:"inclusionPromise"`
	CanonicalizedBody string `json:"canonicalizedBody"`
}

type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*f = flexInt(n)
	return err
}

// Policy is what the caller expects of the signer; empty fields accept
// any value but the result still records it.
type Policy struct {
	Identity string // certificate SAN: an e-mail address or URI
	Issuer   string // OIDC issuer from the Fulcio extension
}

// BundleResult is what a verified bundle proves.
type BundleResult struct {
	Digest     string `json:"digest"`      // 1220… of the artifact
	Identity   string `json:"identity"`    // certificate SAN
	Issuer     string `json:"issuer"`      // OIDC issuer
	SignedAt   string `json:"signed_at"`   // RFC 3339
	TimeSource string `json:"time_source"` // "tlog:<log index>" or "verifier_clock"
	Content    string `json:"content"`     // "message_signature" or "dsse"
}

// Fulcio certificate extensions carrying the OIDC issuer.
var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1} // raw string
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8} // DER UTF8String
)

// VerifyBundle checks a keyless Sigstore bundle offline: the certificate
// chains to root and was valid at signing time, the signature verifies,
// the signer matches policy and the bundle is for digest (1220…).
func VerifyBundle(raw []byte, root TrustedRoot, digest string, pol Policy, clock ports.Clock) (BundleResult, error) {
	b, leaf, extra, err := parseBundle(raw)
	if err != nil {
		return BundleResult{}, err
	}
	at, src, err := signingTime(b, root, clock)
	if err != nil {
		return BundleResult{}, err
	}
	if err := checkChain(leaf, extra, root, at, src); err != nil {
		return BundleResult{}, err
	}
	res := BundleResult{Digest: digest, SignedAt: at.UTC().Format(time.RFC3339), TimeSource: src}
	if res.Identity, res.Issuer, err = identity(leaf, pol); err != nil {
		return BundleResult{}, err
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return BundleResult{}, fmt.Errorf("bundle: certificate key is %T; this verifier supports ECDSA (Fulcio's default)", leaf.PublicKey)
	}
	if b.DSSEEnvelope != nil {
		res.Content, err = "dsse", verifyBundleDSSE(b, pub, digest)
	} else {
		res.Content, err = "message_signature", verifyMessage(b, pub, digest)
	}
	if err != nil {
		return BundleResult{}, err
	}
	return res, bindTlog(b)
}

func parseBundle(raw []byte) (Bundle, *x509.Certificate, []*x509.Certificate, error) {
	var b Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: %w", err)
	}
	if !strings.HasPrefix(b.MediaType, "application/vnd.dev.sigstore.bundle") {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: mediaType %q: want application/vnd.dev.sigstore.bundle.v0.3+json", b.MediaType)
	}
	if (b.MessageSignature == nil) == (b.DSSEEnvelope == nil) {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: want exactly one of messageSignature and dsseEnvelope")
	}
	var ders []RawBytes
	switch vm := b.VerificationMaterial; {
	case vm.Certificate != nil:
		ders = []RawBytes{*vm.Certificate}
	case vm.X509CertificateChain != nil:
		ders = vm.X509CertificateChain.Certificates
	}
	if len(ders) == 0 {
		return Bundle{}, nil, nil, fmt.Errorf("bundle: verificationMaterial has no certificate; public-key bundles are not keyless and are not supported")
	}
	var certs []*x509.Certificate
	for i, d := range ders {
		c, err := parseCert(d.RawBytes)
		if err != nil {
			return Bundle{}, nil, nil, fmt.Errorf("bundle: certificate %d: %w", i, err)
		}
		certs = append(certs, c)
	}
	return b, certs[0], certs[1:], nil
}

// signingTime is the Rekor integrated time once its signed entry
// timestamp verifies; without a log entry only the verifier's clock is
// left, which a short-lived Fulcio certificate will normally be past.
func signingTime(b Bundle, root TrustedRoot, clock ports.Clock) (time.Time, string, error) {
	for i, e := range b.VerificationMaterial.TlogEntries {
		if e.InclusionPromise == nil {
			continue
		}
		if err := verifySET(e, root); err != nil {
			return time.Time{}, "", refuse(ReasonUntrusted, "tlogEntries[%d]: %v", i, err)
		}
		return time.Unix(int64(e.IntegratedTime), 0).UTC(), "tlog:" + strconv.FormatInt(int64(e.LogIndex), 10), nil
	}
	return clock.Now().UTC(), "verifier_clock", nil
}

// verifySET checks Rekor's signature over the canonical entry summary.
func verifySET(e TlogEntry, root TrustedRoot) error {
	log, ok := root.tlog(e.LogID.KeyID)
	if !ok {
		return fmt.Errorf("log %s is not in the trusted root", e.LogID.KeyID)
	}
	der, _ := base64.StdEncoding.DecodeString(log.PublicKey.RawBytes)
	k, err := x509.ParsePKIXPublicKey(der)
	pub, ok := k.(*ecdsa.PublicKey)
	if err != nil || !ok {
		return fmt.Errorf("log %s key is not an ECDSA PKIX key", e.LogID.KeyID)
	}
	id, _ := base64.StdEncoding.DecodeString(e.LogID.KeyID)
	summary, err := json.Marshal(struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogID          string `json:"logID"`
		LogIndex       int64  `json:"logIndex"`
	}{e.CanonicalizedBody, int64(e.IntegratedTime), hex.EncodeToString(id), int64(e.LogIndex)})
	if err == nil {
		summary, err = canon.Canonicalize(summary)
	}
	set, _ := base64.StdEncoding.DecodeString(e.InclusionPromise.SignedEntryTimestamp)
	sum := sha256.Sum256(summary)
	if err != nil || !ecdsa.VerifyASN1(pub, sum[:], set) {
		return errors.New("the signed entry timestamp does not verify with the log's key")
	}
	return nil
}

func checkChain(leaf *x509.Certificate, extra []*x509.Certificate, root TrustedRoot, at time.Time, src string) error {
	if at.Before(leaf.NotBefore) || at.After(leaf.NotAfter) {
		when := "at signing time " + at.Format(time.RFC3339) + " (" + src + ")"
		if src == "verifier_clock" {
			when = "now (" + at.Format(time.RFC3339) + "), and no transparency-log entry proves an earlier signing time"
		}
		return refuse(ReasonExpired, "certificate for %s is valid %s to %s, not %s", sanOf(leaf),
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), when)
	}
	roots, inter, err := root.pools(at)
	if err != nil {
		return err
	}
	for _, c := range extra {
		inter.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}})
	if err != nil {
		return refuse(ReasonUntrusted, "certificate for %s does not chain to the trusted root at %s: %v", sanOf(leaf), at.Format(time.RFC3339), err)
	}
	return nil
}

func sanOf(c *x509.Certificate) string {
	if len(c.EmailAddresses) > 0 {
		return c.EmailAddresses[0]
	}
	if len(c.URIs) > 0 {
		return c.URIs[0].String()
	}
	return "(no SAN)"
}

// identity reads the signer from the certificate and holds it to pol.
func identity(c *x509.Certificate, pol Policy) (string, string, error) {
	id, iss := sanOf(c), ""
	for _, ext := range c.Extensions {
		switch {
		case ext.Id.Equal(oidIssuerV2):
			var s string
			if _, err := asn1.Unmarshal(ext.Value, &s); err == nil {
				iss = s
			}
		case ext.Id.Equal(oidIssuerV1) && iss == "":
			iss = string(ext.Value)
		}
	}
	if pol.Identity != "" && id != pol.Identity {
		return "", "", refuse(ReasonIdentity, "certificate identity is %q, want %q", id, pol.Identity)
	}
	if pol.Issuer != "" && iss != pol.Issuer {
		return "", "", refuse(ReasonIdentity, "certificate issuer is %q, want %q", iss, pol.Issuer)
	}
	return id, iss, nil
}

func verifyMessage(b Bundle, pub *ecdsa.PublicKey, digest string) error {
	ms := b.MessageSignature
	got, err := base64.StdEncoding.DecodeString(ms.MessageDigest.Digest)
	if err != nil || ms.MessageDigest.Algorithm != "SHA2_256" || len(got) != sha256.Size {
		return fmt.Errorf("bundle: messageDigest must be a base64 SHA2_256 digest")
	}
	sig, err := base64.StdEncoding.DecodeString(ms.Signature)
	if err != nil || !ecdsa.VerifyASN1(pub, got, sig) {
		return refuse(ReasonAltered, "the bundle's signature does not verify with its certificate")
	}
	want, err := canon.ParseDigest(digest)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want[:]) {
		return refuse(ReasonDigest, "the bundle signs sha256:%s, but the artifact is %s", short(hex.EncodeToString(got)), short(digest))
	}
	return nil
}

func verifyBundleDSSE(b Bundle, pub *ecdsa.PublicKey, digest string) error {
	env := b.DSSEEnvelope
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil || len(env.Signatures) != 1 {
		return fmt.Errorf("bundle: dsseEnvelope needs a base64 payload and exactly one signature")
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	sum := sha256.Sum256(PAE(env.PayloadType, payload))
	if err != nil || !ecdsa.VerifyASN1(pub, sum[:], sig) {
		return refuse(ReasonAltered, "the bundle's DSSE signature does not verify with its certificate")
	}
	st, err := parseStatement(env.PayloadType, payload)
	if err != nil {
		return err
	}
	if !st.Covers(digest) {
		return refuse(ReasonDigest, "the bundle's statement signs %s, but the artifact is %s", short(strings.Join(st.SubjectDigests(), ",")), short(digest))
	}
	return nil
}
