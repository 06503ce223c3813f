package sign

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/sign/signtest"
	"github.com/narwhal-go/narwhal/internal/ports"
)

var (
	caStart  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	signedAt = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
)

const (
	testIdentity = "dev@example.com"
	testIssuer   = "https://oauth2.example.com/auth"
)

func leafAt(ca *signtest.CA, from time.Time) *signtest.Signer {
	return ca.Issue(signtest.Leaf{Identity: testIdentity, Issuer: testIssuer, NotBefore: from, NotAfter: from.Add(10 * time.Minute)})
}

func mustRoot(t *testing.T, ca *signtest.CA) TrustedRoot {
	t.Helper()
	tr, err := ParseTrustedRoot(ca.TrustedRoot())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestVerifyBundleAccepts(t *testing.T) {
	ca := signtest.NewCA(rand.Reader, caStart)
	root := mustRoot(t, ca)
	rec := testRecord(t, "healthy")
	st, _ := StatementFor(rec)
	payload, _ := st.Encode()
	leaf := leafAt(ca, signedAt.Add(-time.Minute))
	later := ports.NewFake(signedAt.Add(30 * 24 * time.Hour)) // long after the certificate expired
	cases := []struct {
		name, content, source string
		bundle                []byte
		clock                 ports.Clock
	}{
		{"message signature, logged", "message_signature", "tlog:42", leaf.MessageBundle(rec, signedAt), later},
		{"dsse, logged", "dsse", "tlog:42", leaf.DSSEBundle(PayloadType, payload, signedAt), later},
		{"message signature, no log, verified inside validity", "message_signature", "verifier_clock", leaf.MessageBundle(rec, time.Time{}), ports.NewFake(signedAt)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := VerifyBundle(c.bundle, root, canon.Digest(rec), Policy{Identity: testIdentity, Issuer: testIssuer}, c.clock)
			if err != nil {
				t.Fatal(err)
			}
			if res.Identity != testIdentity || res.Issuer != testIssuer || res.Content != c.content || res.TimeSource != c.source || res.Digest != canon.Digest(rec) {
				t.Fatalf("result %+v", res)
			}
		})
	}
	// An empty policy still records who signed.
	res, err := VerifyBundle(cases[0].bundle, root, canon.Digest(rec), Policy{}, later)
	if err != nil || res.Identity != testIdentity || res.Issuer != testIssuer || res.SignedAt != "2026-09-10T12:00:00Z" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestVerifyBundleRefusals(t *testing.T) {
	ca, otherCA := signtest.NewCA(rand.Reader, caStart), signtest.NewCA(rand.Reader, caStart)
	root := mustRoot(t, ca)
	rec, other := testRecord(t, "healthy"), testRecord(t, "failed")
	leaf := leafAt(ca, signedAt.Add(-time.Minute))
	now := ports.NewFake(signedAt)
	good := leaf.MessageBundle(rec, signedAt)
	otherStatement, _ := StatementFor(other)
	otherPayload, _ := otherStatement.Encode()
	cases := []struct {
		name   string
		bundle []byte
		digest string
		pol    Policy
		clock  ports.Clock
		reason Reason
		msg    string
	}{
		{"expired certificate, no log entry", leaf.MessageBundle(rec, time.Time{}), canon.Digest(rec), Policy{}, ports.NewFake(signedAt.Add(time.Hour)), ReasonExpired, "no transparency-log entry"},
		{"logged after the certificate expired", leaf.MessageBundle(rec, signedAt.Add(time.Hour)), canon.Digest(rec), Policy{}, now, ReasonExpired, "valid 2026-09-10T11:59:00Z to 2026-09-10T12:09:00Z"},
		{"bundle for another digest", good, canon.Digest(other), Policy{}, now, ReasonDigest, "but the artifact is"},
		{"dsse bundle for another record", leaf.DSSEBundle(PayloadType, otherPayload, signedAt), canon.Digest(rec), Policy{}, now, ReasonDigest, "statement signs"},
		{"another CA", leafAt(otherCA, signedAt.Add(-time.Minute)).MessageBundle(rec, time.Time{}), canon.Digest(rec), Policy{}, now, ReasonUntrusted, "does not chain"},
		{"another log", leafAt(otherCA, signedAt.Add(-time.Minute)).MessageBundle(rec, signedAt), canon.Digest(rec), Policy{}, now, ReasonUntrusted, "not in the trusted root"},
		{"wrong identity", good, canon.Digest(rec), Policy{Identity: "mallory@example.com"}, now, ReasonIdentity, `"dev@example.com", want "mallory@example.com"`},
		{"wrong issuer", good, canon.Digest(rec), Policy{Issuer: "https://accounts.example.org"}, now, ReasonIdentity, "issuer"},
		{"tampered signed entry timestamp", []byte(strings.Replace(string(good), `"integratedTime": "`, `"integratedTime": "1`, 1)), canon.Digest(rec), Policy{}, now, ReasonUntrusted, "signed entry timestamp"},
		{"altered signature", swapSignature(t, good, leaf.MessageBundle(other, signedAt)), canon.Digest(rec), Policy{}, now, ReasonAltered, "does not verify"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyBundle(c.bundle, root, c.digest, c.pol, c.clock)
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != c.reason || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err %v, want refusal %s containing %q", err, c.reason, c.msg)
			}
		})
	}
}

// swapSignature puts from's signature into into, keeping into's digest.
func swapSignature(t *testing.T, into, from []byte) []byte {
	t.Helper()
	sig := func(b []byte) string {
		s := string(b)
		i := strings.Index(s, `"signature": "`) + len(`"signature": "`)
		return s[i : i+strings.Index(s[i:], `"`)]
	}
	return []byte(strings.Replace(string(into), sig(into), sig(from), 1))
}

func TestBundleBadInput(t *testing.T) {
	ca := signtest.NewCA(rand.Reader, caStart)
	root := mustRoot(t, ca)
	for _, in := range []string{`{`, `{"mediaType":"x"}`, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{}}`,
		`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{},"verificationMaterial":{}}`} {
		_, err := VerifyBundle([]byte(in), root, canon.Digest([]byte(`{}`)), Policy{}, ports.NewFake(signedAt))
		var r *Refusal
		if err == nil || errors.As(err, &r) {
			t.Errorf("%s: err %v, want bad input", in, err)
		}
	}
	if _, err := ParseTrustedRoot([]byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)); err == nil {
		t.Error("a trusted root without certificate authorities was accepted")
	}
}
