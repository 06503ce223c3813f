// Package signtest makes Sigstore-shaped test material with a private test
// CA and a test transparency-log key: trusted roots, Fulcio-like leaf
// certificates and bundles. Keyless signing needs network and OIDC, so
// tests verify bundles this package builds in the same shapes. Entropy is
// passed in (tests pass crypto/rand.Reader) to keep evidence code free of
// ambient randomness (INV-42).
package signtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
)

var b64 = base64.StdEncoding.EncodeToString

// CA is a test Fulcio root plus a test Rekor key.
type CA struct {
	Root    *x509.Certificate
	rootKey *ecdsa.PrivateKey
	logKey  *ecdsa.PrivateKey
	logID   []byte
	rand    io.Reader
	serial  int64
}

// Signer is a leaf certificate and its key, like one Fulcio issues.
type Signer struct {
	Cert *x509.Certificate
	// MediaType is the bundle version written; NewCA's Issue sets v0.3.
	// v0.1 bundles need no inclusion proof, only the signed entry timestamp.
	MediaType string
	key       *ecdsa.PrivateKey
	ca        *CA
}

// Bundle media types.
const (
	MediaTypeV01 = "application/vnd.dev.sigstore.bundle+json;version=0.1"
	MediaTypeV03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
)

// Leaf describes the certificate to issue.
type Leaf struct {
	Identity            string // e-mail, or a URI when it contains "://"
	Issuer              string
	NotBefore, NotAfter time.Time
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// NewCA makes a root valid for ten years from start.
func NewCA(entropy io.Reader, start time.Time) *CA {
	ca := &CA{rand: entropy, serial: 1}
	ca.rootKey = must(ecdsa.GenerateKey(elliptic.P256(), entropy))
	ca.logKey = must(ecdsa.GenerateKey(elliptic.P256(), entropy))
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "narwhal test fulcio root", Organization: []string{"narwhal-test"}},
		NotBefore: start, NotAfter: start.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	ca.Root = must(x509.ParseCertificate(must(x509.CreateCertificate(entropy, tmpl, tmpl, &ca.rootKey.PublicKey, ca.rootKey))))
	der := must(x509.MarshalPKIXPublicKey(&ca.logKey.PublicKey))
	sum := sha256.Sum256(der)
	ca.logID = sum[:]
	return ca
}

// TrustedRoot is a trusted_root.json naming this CA and log.
func (ca *CA) TrustedRoot() []byte {
	logDER := must(x509.MarshalPKIXPublicKey(&ca.logKey.PublicKey))
	start := ca.Root.NotBefore.UTC().Format(time.RFC3339)
	root := map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"tlogs": []any{map[string]any{
			"baseUrl": "https://rekor.test", "hashAlgorithm": "SHA2_256",
			"publicKey": map[string]any{"rawBytes": b64(logDER), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": map[string]any{"start": start}},
			"logId":     map[string]any{"keyId": b64(ca.logID)},
		}},
		"certificateAuthorities": []any{map[string]any{
			"subject": map[string]any{"organization": "narwhal-test", "commonName": "narwhal test fulcio root"}, "uri": "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(ca.Root.Raw)}}},
			"validFor":  map[string]any{"start": start},
		}},
	}
	return must(json.MarshalIndent(root, "", "  "))
}

// Issue makes a code-signing leaf with the OIDC identity as SAN and the
// issuer in Fulcio's 1.3.6.1.4.1.57264.1.8 extension.
func (ca *CA) Issue(l Leaf) *Signer {
	key := must(ecdsa.GenerateKey(elliptic.P256(), ca.rand))
	ca.serial++
	iss := must(asn1.MarshalWithParams(l.Issuer, "utf8"))
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), NotBefore: l.NotBefore, NotAfter: l.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: iss}},
	}
	if strings.Contains(l.Identity, "://") {
		tmpl.URIs = []*url.URL{must(url.Parse(l.Identity))}
	} else {
		tmpl.EmailAddresses = []string{l.Identity}
	}
	der := must(x509.CreateCertificate(ca.rand, tmpl, ca.Root, &key.PublicKey, ca.rootKey))
	return &Signer{Cert: must(x509.ParseCertificate(der)), MediaType: MediaTypeV03, key: key, ca: ca}
}

// MessageBundle signs artifact's SHA-256 (messageSignature content). A
// zero logged time leaves the bundle without a transparency-log entry.
func (s *Signer) MessageBundle(artifact []byte, logged time.Time) []byte {
	sum := sha256.Sum256(artifact)
	sig := must(ecdsa.SignASN1(s.ca.rand, s.key, sum[:]))
	content := map[string]any{"messageSignature": map[string]any{
		"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": b64(sum[:])}, "signature": b64(sig)}}
	body := map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
		"signature": map[string]any{"content": b64(sig), "publicKey": map[string]any{"content": b64(s.certPEM())}}}}
	return s.bundle(content, body, logged)
}

// DSSEBundle signs a DSSE envelope over payload (dsseEnvelope content).
func (s *Signer) DSSEBundle(payloadType string, payload []byte, logged time.Time) []byte {
	pae := "DSSEv1 " + itoa(len(payloadType)) + " " + payloadType + " " + itoa(len(payload)) + " " + string(payload)
	sum := sha256.Sum256([]byte(pae))
	sig := b64(must(ecdsa.SignASN1(s.ca.rand, s.key, sum[:])))
	content := map[string]any{"dsseEnvelope": map[string]any{
		"payloadType": payloadType, "payload": b64(payload), "signatures": []any{map[string]any{"sig": sig, "keyid": ""}}}}
	ph := sha256.Sum256(payload)
	eh := sha256.Sum256(must(json.Marshal(content["dsseEnvelope"])))
	body := map[string]any{"apiVersion": "0.0.1", "kind": "dsse", "spec": map[string]any{
		"envelopeHash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(eh[:])},
		"payloadHash":  map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(ph[:])},
		"signatures":   []any{map[string]any{"signature": sig, "verifier": b64(s.certPEM())}}}}
	return s.bundle(content, body, logged)
}

// certPEM is the leaf as Rekor stores it in an entry body: PEM, then base64.
func (s *Signer) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Cert.Raw})
}

func (s *Signer) bundle(content, body map[string]any, logged time.Time) []byte {
	vm := map[string]any{"certificate": map[string]any{"rawBytes": b64(s.Cert.Raw)}, "tlogEntries": []any{}}
	if !logged.IsZero() {
		vm["tlogEntries"] = []any{s.ca.entry(body["kind"].(string), must(json.Marshal(body)), logged)}
	}
	content["mediaType"] = s.MediaType
	content["verificationMaterial"] = vm
	return must(json.MarshalIndent(content, "", "  "))
}

// entry is a Rekor entry with a signed entry timestamp over the canonical
// summary {body, integratedTime, logID, logIndex}.
func (ca *CA) entry(kind string, body []byte, logged time.Time) map[string]any {
	const index = 42
	summary := must(json.Marshal(map[string]any{"body": b64(body), "integratedTime": logged.Unix(), "logID": hex.EncodeToString(ca.logID), "logIndex": index}))
	sum := sha256.Sum256(must(canon.Canonicalize(summary)))
	set := must(ecdsa.SignASN1(ca.rand, ca.logKey, sum[:]))
	return map[string]any{
		"logIndex": itoa(index), "logId": map[string]any{"keyId": b64(ca.logID)},
		"kindVersion":    map[string]any{"kind": kind, "version": "0.0.1"},
		"integratedTime": itoa(int(logged.Unix())), "inclusionPromise": map[string]any{"signedEntryTimestamp": b64(set)},
		"canonicalizedBody": b64(body),
	}
}

func itoa(n int) string { return big.NewInt(int64(n)).String() }
