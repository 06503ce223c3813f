// Package sigbundletest builds Sigstore trusted roots and bundles for tests
// from sigstore-go's own virtual Sigstore (pkg/testing/ca): its Rekor key
// signs entry promises, inclusion proofs and checkpoints, its timestamp
// authority answers RFC 3161 requests, and its Fulcio issues leaves. A second
// Fulcio made with the same package's helpers issues leaves at a chosen time,
// so tests can hold a certificate that has already expired. Everything is
// in memory; nothing touches the network. This package's own keys and
// signatures draw from the entropy its caller passes, and its times come
// from the caller too (INV-42); sigstore-go's helpers inside use
// crypto/rand and the wall clock, which is why the caller passes now.
package sigbundletest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/testing/data"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"
)

// MediaTypeV03 is the bundle version every builder here writes.
const MediaTypeV03 = "application/vnd.dev.sigstore.bundle.v0.3+json"

// Sigstore is sigstore-go's virtual Sigstore plus a second Fulcio whose
// leaves start when the test says.
type Sigstore struct {
	VS       *ca.VirtualSigstore
	fulcio   *root.FulcioCertificateAuthority
	interKey *ecdsa.PrivateKey
	entropy  io.Reader
}

// New makes a fresh virtual Sigstore. now must be the wall clock's time:
// sigstore-go's helpers make their certificates valid around time.Now.
func New(entropy io.Reader, now time.Time) (*Sigstore, error) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, fmt.Errorf("virtual sigstore: %w", err)
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		return nil, err
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		return nil, err
	}
	f := &root.FulcioCertificateAuthority{Root: rootCert, Intermediates: []*x509.Certificate{inter},
		ValidityPeriodStart: now.Add(-5 * time.Hour), ValidityPeriodEnd: now.Add(time.Hour), URI: "https://fulcio.timed.test"}
	return &Sigstore{VS: vs, fulcio: f, interKey: interKey, entropy: entropy}, nil
}

// RootOptions chooses what a trusted root trusts.
type RootOptions struct {
	RekorFrom  *Sigstore // whose Rekor key the root names (default: the receiver's)
	FulcioFrom *Sigstore // whose certificate authorities the root names (default: the receiver's)
	CTLogs     bool      // name the virtual CT log, so SCTs become required
}

// TrustedRoot is a trusted_root.json for this Sigstore.
func (s *Sigstore) TrustedRoot(o RootOptions) ([]byte, error) {
	if o.RekorFrom == nil {
		o.RekorFrom = s
	}
	if o.FulcioFrom == nil {
		o.FulcioFrom = s
	}
	cas := append(o.FulcioFrom.VS.FulcioCertificateAuthorities(), o.FulcioFrom.fulcio)
	ct := map[string]*root.TransparencyLog{}
	if o.CTLogs {
		ct = rawIDs(s.VS.CTLogs())
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, cas, ct, s.VS.TimestampingAuthorities(), rawIDs(o.RekorFrom.VS.RekorLogs()))
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// rawIDs gives each log the raw key id a trusted_root.json carries; the
// virtual Sigstore keeps the hex text there, which only its in-memory
// lookups understand.
func rawIDs(logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
	out := map[string]*root.TransparencyLog{}
	for id, l := range logs {
		c := *l
		c.ID, _ = hex.DecodeString(id)
		out[id] = &c
	}
	return out
}

// JSON is a bundle as a verifier reads it.
func JSON(b *protobundle.Bundle) ([]byte, error) { return protojson.Marshal(b) }

// MessageBundle signs artifact with a leaf of the virtual Fulcio (valid
// for ten minutes from now) and logs it in Rekor v1 at logged with a
// promise and an inclusion proof; tsa adds an RFC 3161 timestamp.
func (s *Sigstore) MessageBundle(identity, issuer string, artifact []byte, logged time.Time, tsa bool) (*protobundle.Bundle, error) {
	e, err := s.VS.SignAtTime(identity, issuer, artifact, logged)
	if err != nil {
		return nil, err
	}
	vc, err := e.VerificationContent()
	if err != nil {
		return nil, err
	}
	// The virtual Fulcio stamps the leaf's NotBefore when it signs, in
	// whole seconds: a logged time taken just before a second boundary
	// then precedes the leaf, and the bundle reads as expired. Log such a
	// bundle at the leaf's start instead (a time meant to be outside the
	// leaf's validity is minutes away, not under two seconds).
	if nb := vc.Certificate().NotBefore; logged.Before(nb) && nb.Sub(logged) < 2*time.Second {
		if e, err = s.VS.SignAtTime(identity, issuer, artifact, nb); err != nil {
			return nil, err
		}
		if vc, err = e.VerificationContent(); err != nil {
			return nil, err
		}
	}
	entries, err := e.TlogEntries()
	if err != nil {
		return nil, err
	}
	entry, err := s.v1Entry("hashedrekord", entries[0].TransparencyLogEntry())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(artifact)
	sc, _ := e.SignatureContent()
	b := newBundle(certificate(vc.Certificate()), entry)
	b.Content = &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
		MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
		Signature:     sc.Signature()}}
	if tsa {
		err = s.stamp(b, sc.Signature())
	}
	return b, err
}

// DSSEBundle signs an in-toto payload with a leaf of the timed Fulcio valid
// for ten minutes from leafFrom and logs it in Rekor v1 (dsse 0.0.1) at
// logged with a promise and an inclusion proof; tsa adds an RFC 3161
// timestamp (taken now).
func (s *Sigstore) DSSEBundle(identity, issuer string, payload []byte, leafFrom, logged time.Time, tsa bool) (*protobundle.Bundle, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), s.entropy)
	if err != nil {
		return nil, err
	}
	leaf, err := ca.GenerateLeafCert(identity, issuer, leafFrom, key, s.fulcio.Intermediates[0], s.interKey)
	if err != nil {
		return nil, err
	}
	const payloadType = "application/vnd.in-toto+json"
	pae := sha256.Sum256(dsse.PAE(payloadType, payload))
	sig, err := ecdsa.SignASN1(s.entropy, key, pae[:])
	if err != nil {
		return nil, err
	}
	env := &dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(payload),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
	raw, err := s.VS.GenerateTlogEntry(leaf, env, sig, logged.Unix(), false)
	if err != nil {
		return nil, err
	}
	entry, err := s.v1Entry("dsse", raw.TransparencyLogEntry())
	if err != nil {
		return nil, err
	}
	b := newBundle(certificate(leaf), entry)
	b.Content = envelope(payloadType, payload, sig)
	if tsa {
		err = s.stamp(b, sig)
	}
	return b, err
}

// RekorV2Bundle signs an in-toto payload with a virtual Fulcio leaf, logs
// it in Rekor v2 (hashedrekord 0.0.2: inclusion proof and signed
// checkpoint, no integrated time) and adds the RFC 3161 timestamp that
// Rekor v2 bundles need for a signing time.
func (s *Sigstore) RekorV2Bundle(identity, issuer string, payload []byte) (*protobundle.Bundle, error) {
	e, err := s.VS.AttestHashedRekordV2(identity, issuer, payload)
	if err != nil {
		return nil, err
	}
	vc, _ := e.VerificationContent()
	entries, _ := e.TlogEntries()
	sc, _ := e.SignatureContent()
	raw := sc.EnvelopeContent().RawEnvelope()
	b := newBundle(certificate(vc.Certificate()), entries[0].TransparencyLogEntry())
	b.Content = envelope(raw.PayloadType, payload, sc.Signature())
	return b, s.stamp(b, sc.Signature())
}

// KeyBundle signs artifact's SHA-256 with key (a public-key bundle, no
// certificate), stamped by the virtual timestamp authority and not logged.
func (s *Sigstore) KeyBundle(key *ecdsa.PrivateKey, artifact []byte) (*protobundle.Bundle, error) {
	sum := sha256.Sum256(artifact)
	sig, err := ecdsa.SignASN1(s.entropy, key, sum[:])
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(der)
	b := newBundle(&protobundle.VerificationMaterial{Content: &protobundle.VerificationMaterial_PublicKey{
		PublicKey: &protocommon.PublicKeyIdentifier{Hint: base64.StdEncoding.EncodeToString(id[:])}}})
	b.Content = &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
		MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]}, Signature: sig}}
	return b, s.stamp(b, sig)
}

// v1Entry completes the entry sigstore-go's helper made: the kind, the
// signed entry timestamp over {body, integratedTime, logID, logIndex} and
// an inclusion proof with a signed checkpoint.
func (s *Sigstore) v1Entry(kind string, tle *protorekor.TransparencyLogEntry) (*protorekor.TransparencyLogEntry, error) {
	body := tle.CanonicalizedBody
	set, err := s.VS.RekorSignPayload(tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(body),
		IntegratedTime: tle.IntegratedTime, LogIndex: tle.LogIndex, LogID: hex.EncodeToString(tle.LogId.KeyId)})
	if err != nil {
		return nil, err
	}
	p, err := s.VS.GetInclusionProof(body)
	if err != nil {
		return nil, err
	}
	rootHash, err := hex.DecodeString(*p.RootHash)
	if err != nil {
		return nil, err
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex: tle.LogIndex, LogId: tle.LogId, IntegratedTime: tle.IntegratedTime, CanonicalizedBody: body,
		KindVersion:      &protorekor.KindVersion{Kind: kind, Version: "0.0.1"},
		InclusionPromise: &protorekor.InclusionPromise{SignedEntryTimestamp: set},
		// The virtual log holds this one entry: index 0 of a tree of 1.
		InclusionProof: &protorekor.InclusionProof{LogIndex: *p.LogIndex, TreeSize: *p.TreeSize, RootHash: rootHash,
			Hashes: [][]byte{}, Checkpoint: &protorekor.Checkpoint{Envelope: *p.Checkpoint}},
	}, nil
}

// Restamp replaces b's RFC 3161 timestamp with one over its current
// signature, for tests that alter the signature and nothing else.
func (s *Sigstore) Restamp(b *protobundle.Bundle) error {
	if ms := b.GetMessageSignature(); ms != nil {
		return s.stamp(b, ms.Signature)
	}
	return s.stamp(b, b.GetDsseEnvelope().Signatures[0].Sig)
}

// stamp adds the virtual timestamp authority's answer over sig.
func (s *Sigstore) stamp(b *protobundle.Bundle, sig []byte) error {
	ts, err := s.VS.TimestampResponse(sig)
	if err != nil {
		return err
	}
	b.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{
		Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: ts}}}
	return nil
}

func certificate(c *x509.Certificate) *protobundle.VerificationMaterial {
	return &protobundle.VerificationMaterial{Content: &protobundle.VerificationMaterial_Certificate{
		Certificate: &protocommon.X509Certificate{RawBytes: c.Raw}}}
}

func newBundle(vm *protobundle.VerificationMaterial, entries ...*protorekor.TransparencyLogEntry) *protobundle.Bundle {
	vm.TlogEntries = entries
	return &protobundle.Bundle{MediaType: MediaTypeV03, VerificationMaterial: vm}
}

func envelope(payloadType string, payload, sig []byte) *protobundle.Bundle_DsseEnvelope {
	return &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
		PayloadType: payloadType, Payload: payload, Signatures: []*protodsse.Signature{{Sig: sig}}}}
}

// PublicGood is a bundle made by Sigstore's public instance (sigstore-js
// 2.0.0's npm provenance, a v0.1 DSSE bundle) and the public-good trusted
// root, both from sigstore-go's test data, as JSON.
func PublicGood(t *testing.T) (bundleJSON, rootJSON []byte) {
	t.Helper()
	b, err := data.Bundle(t, "sigstore.js@2.0.0-provenance.sigstore.json").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r, err := data.TrustedRoot(t, "public-good.json").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}
