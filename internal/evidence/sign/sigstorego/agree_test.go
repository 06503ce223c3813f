// Package sigstorego cross-checks narwhal's offline Sigstore bundle
// verifier (internal/evidence/sign) against sigstore-go, the Sigstore
// project's Go verifier, on the same test-CA bundles. It is a separate
// module so the main module does not carry sigstore-go's ~80
// requirements; run it with `make sigstore-check`.
package sigstorego

import (
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
	"github.com/narwhal-go/narwhal/internal/evidence/sign/signtest"
	"github.com/narwhal-go/narwhal/internal/ports"
)

const (
	identity = "dev@example.com"
	issuer   = "https://oauth2.example.com/auth"
)

func sigstoreGo(t *testing.T, rootJSON, bundleJSON, artifact []byte, id string) error {
	t.Helper()
	tr, err := root.NewTrustedRootFromJSON(rootJSON)
	if err != nil {
		t.Fatalf("sigstore-go cannot read the test trusted root: %v", err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return err
	}
	v, err := verify.NewVerifier(tr, verify.WithTransparencyLog(1), verify.WithIntegratedTimestamps(1))
	if err != nil {
		t.Fatal(err)
	}
	cid, err := verify.NewShortCertificateIdentity(issuer, "", id, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(artifact)
	_, err = v.Verify(&b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum[:]), verify.WithCertificateIdentity(cid)))
	return err
}

// TestVerifiersAgree: every bundle narwhal accepts, sigstore-go accepts,
// and every bundle narwhal refuses, sigstore-go refuses.
func TestVerifiersAgree(t *testing.T) {
	at := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	ca, other := signtest.NewCA(rand.Reader, at.AddDate(0, -6, 0)), signtest.NewCA(rand.Reader, at.AddDate(0, -6, 0))
	leaf := ca.Issue(signtest.Leaf{Identity: identity, Issuer: issuer, NotBefore: at.Add(-time.Minute), NotAfter: at.Add(9 * time.Minute)})
	stranger := other.Issue(signtest.Leaf{Identity: identity, Issuer: issuer, NotBefore: at.Add(-time.Minute), NotAfter: at.Add(9 * time.Minute)})
	leaf.MediaType, stranger.MediaType = signtest.MediaTypeV01, signtest.MediaTypeV01
	rec := []byte(`{"claim":{"quantity":"boot","tolerance":0,"unit":"","value":null,"verdict":"healthy"},"claim_scope":"boot","corrects":null,"display":{},"engine":{"name":"vllm","packages":[],"version":"0.11.0"},"epistemic_status":"measured","kind":"boot","level":"community_reported","license":"CDLA-Permissive-2.0","observed_at":"2026-09-10T12:00:00Z","provenance":{"inputs":[],"producer":"me","producer_version":"0"},"schema":"narwhal.evidence.record","schema_version":1,"subject":{"artifact":"a"}}`)
	otherRec := []byte(`{"a":2}`)
	rootJSON := ca.TrustedRoot()
	type agreeCase struct {
		name     string
		bundle   []byte
		artifact []byte
		id       string
		accept   bool
	}
	cases := []agreeCase{
		{"logged message signature", leaf.MessageBundle(rec, at), rec, identity, true},
		{"bundle for another digest", leaf.MessageBundle(rec, at), otherRec, identity, false},
		{"logged after the certificate expired", leaf.MessageBundle(rec, at.Add(time.Hour)), rec, identity, false},
		{"another CA and log", stranger.MessageBundle(rec, at), rec, identity, false},
		{"wrong identity", leaf.MessageBundle(rec, at), rec, "eve@example.com", false},
	}
	st, err := sign.StatementFor(rec)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := st.Encode()
	cases = append(cases,
		agreeCase{"logged DSSE statement", leaf.DSSEBundle(sign.PayloadType, payload, at), rec, identity, true},
		agreeCase{"DSSE statement for another record", leaf.DSSEBundle(sign.PayloadType, payload, at), otherRec, identity, false},
	)
	root, err := sign.ParseTrustedRoot(rootJSON)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ours := sign.VerifyBundle(c.bundle, root, canon.Digest(c.artifact), sign.Policy{Identity: c.id, Issuer: issuer}, ports.NewFake(at.AddDate(0, 1, 0)))
			theirs := sigstoreGo(t, rootJSON, c.bundle, c.artifact, c.id)
			if (ours == nil) != c.accept || (theirs == nil) != c.accept {
				t.Fatalf("want accept=%v; narwhal: %v; sigstore-go: %v", c.accept, ours, theirs)
			}
			t.Logf("narwhal: %v; sigstore-go: %v", ours, theirs)
		})
	}
}

// TestV03WithoutInclusionProof pins a documented difference: narwhal
// accepts a v0.3 bundle whose log entry has only a signed entry timestamp;
// sigstore-go requires an inclusion proof for v0.2 and later.
func TestV03WithoutInclusionProof(t *testing.T) {
	at := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	ca := signtest.NewCA(rand.Reader, at.AddDate(0, -6, 0))
	leaf := ca.Issue(signtest.Leaf{Identity: identity, Issuer: issuer, NotBefore: at.Add(-time.Minute), NotAfter: at.Add(9 * time.Minute)})
	rec := []byte(`{"a":1}`)
	b := leaf.MessageBundle(rec, at) // v0.3
	root, _ := sign.ParseTrustedRoot(ca.TrustedRoot())
	_, ours := sign.VerifyBundle(b, root, canon.Digest(rec), sign.Policy{}, ports.NewFake(at))
	theirs := sigstoreGo(t, ca.TrustedRoot(), b, rec, identity)
	if ours != nil || theirs == nil {
		t.Fatalf("the difference changed: narwhal %v, sigstore-go %v (update docs/evidence.md)", ours, theirs)
	}
	t.Logf("sigstore-go: %v", theirs)
}
