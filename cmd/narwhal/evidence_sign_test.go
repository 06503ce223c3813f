package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/sigbundle/sigbundletest"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
)

const signRecordJSON = `{"schema":"narwhal.evidence.record","schema_version":1,"kind":"boot","claim_scope":"boot","epistemic_status":"measured","level":"community_reported","subject":{"artifact":"a"},"claim":{"quantity":"boot","verdict":"healthy","value":null,"unit":"","tolerance":0},"engine":{"name":"vllm","version":"0.11.0","packages":[]},"provenance":{"producer":"me","producer_version":"0","inputs":[]},"corrects":null,"observed_at":"2026-09-10T12:00:00Z","license":"CDLA-Permissive-2.0","display":{}}`

func TestEvidenceKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "k")
	if code, out, errs := runCLI(t, "evidence", "keygen", "--out", prefix); code != 0 || !strings.Contains(out, "key id") {
		t.Fatalf("keygen: %d %q %q", code, out, errs)
	}
	if fi, err := os.Stat(prefix); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v %v, want 0600", fi.Mode(), err)
	}
	if code, _, errs := runCLI(t, "evidence", "keygen", "--out", prefix); code != 2 || !strings.Contains(errs, "exists") {
		t.Fatalf("keygen over an existing key: %d %q", code, errs)
	}
	runCLI(t, "evidence", "keygen", "--out", filepath.Join(dir, "other"))
	rec := writeFile(t, dir, "rec.json", signRecordJSON)
	code, env, errs := runCLI(t, "evidence", "sign", "--key", prefix, rec)
	if code != 0 {
		t.Fatalf("sign: %d %q", code, errs)
	}
	envPath := writeFile(t, dir, "rec.dsse.json", env)
	tampered := writeFile(t, dir, "tampered.json", strings.Replace(signRecordJSON, "healthy", "failed", 1))
	var e sign.Envelope
	_ = json.Unmarshal([]byte(env), &e)
	e.Payload = strings.Replace(e.Payload, "a", "b", 1)
	altered, _ := json.Marshal(e)
	alteredPath := writeFile(t, dir, "altered.dsse.json", string(altered))
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"valid", []string{envPath}, 0, "valid: urn:narwhal:predicate:evidence-record:v1"},
		{"valid with record", []string{envPath, rec}, 0, "subjects 1220"},
		{"tampered record", []string{envPath, tampered}, 1, "refused (digest_mismatch)"},
		{"altered envelope", []string{alteredPath}, 1, "refused ("},
		{"wrong key", []string{"--key", filepath.Join(dir, "other.pub"), envPath}, 1, "refused (wrong_key)"},
		{"not an envelope", []string{rec}, 2, "payloadType is missing"},
		{"private key as public", []string{"--key", prefix, envPath}, 2, "PUBLIC KEY"},
	}
	for _, c := range cases {
		args := append([]string{"evidence", "verify-signature"}, c.args...)
		if !strings.HasPrefix(c.args[0], "--key") {
			args = append([]string{"evidence", "verify-signature", "--key", prefix + ".pub"}, c.args...)
		}
		code, out, errs := runCLI(t, args...)
		if code != c.code || !strings.Contains(out+errs, c.msg) {
			t.Errorf("%s: code %d out %q err %q; want %d containing %q", c.name, code, out, errs, c.code, c.msg)
		}
	}
}

// bundleFiles are the files TestEvidenceVerifyBundle passes, built with
// sigstore-go's virtual Sigstore.
type bundleFiles struct {
	root, otherLog, rec, otherRec, keyPath     string
	bundle, noProof, expired, unstamped, keyed string
}

func writeBundleFiles(t *testing.T, dir string) bundleFiles {
	t.Helper()
	now := time.Now()
	s, err := sigbundletest.New(rand.Reader, now)
	other, err2 := sigbundletest.New(rand.Reader, now)
	canonical, err3 := canon.Canonicalize([]byte(signRecordJSON))
	if err := errors.Join(err, err2, err3); err != nil {
		t.Fatal(err)
	}
	st, _ := sign.StatementFor(canonical)
	payload, _ := st.Encode()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	file := func(name string) func([]byte, error) string {
		return func(b []byte, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return writeFile(t, dir, name, string(b))
		}
	}
	bundle := func(name string) func(*protobundle.Bundle, error) string {
		return func(b *protobundle.Bundle, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return file(name)(sigbundletest.JSON(b))
		}
	}
	f := bundleFiles{
		root:     file("trusted_root.json")(s.TrustedRoot(sigbundletest.RootOptions{})),
		otherLog: file("other_log.json")(s.TrustedRoot(sigbundletest.RootOptions{RekorFrom: other})),
		rec:      writeFile(t, dir, "rec.canon.json", string(canonical)),
		otherRec: writeFile(t, dir, "other.json", strings.Replace(string(canonical), "healthy", "failed", 1)),
		keyPath:  writeFile(t, dir, "cosign.pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))),
		bundle:   bundle("rec.sigstore.json")(s.MessageBundle(testIdentity, testIssuer, canonical, now, false)),
		keyed:    bundle("keyed.sigstore.json")(s.KeyBundle(key, canonical)),
	}
	unproved, err := s.MessageBundle(testIdentity, testIssuer, canonical, now, false)
	if err == nil {
		unproved.VerificationMaterial.TlogEntries[0].InclusionProof = nil
	}
	f.noProof = bundle("noproof.sigstore.json")(unproved, err)
	// Valid from 11 to 1 minutes ago, logged 90 s ago; then without the
	// log's signed entry timestamp, no verified time is left.
	expired, err := s.DSSEBundle(testIdentity, testIssuer, payload, now.Add(-11*time.Minute), now.Add(-90*time.Second), false)
	f.expired = bundle("expired.sigstore.json")(expired, err)
	expired.VerificationMaterial.TlogEntries[0].InclusionPromise = nil
	f.unstamped = bundle("unstamped.sigstore.json")(expired, nil)
	return f
}

// TestEvidenceVerifyBundle runs verify-bundle on bundles built with
// sigstore-go's virtual Sigstore: the exit code, the document on stdout
// and the reason on stderr.
func TestEvidenceVerifyBundle(t *testing.T) {
	f := writeBundleFiles(t, t.TempDir())
	id := []string{"--certificate-identity", testIdentity, "--certificate-oidc-issuer", testIssuer}
	cases := []struct {
		name string
		args []string
		code int
		out  string
		msg  string
	}{
		{"logged, identity pinned", append([]string{"--bundle", f.bundle, f.rec}, id...), 0, `"issuer": "https://oauth2.example.com/auth"`, ""},
		{"tampered artifact", []string{"--bundle", f.bundle, f.otherRec}, 1, `"reason": "digest_mismatch"`, "refused (digest_mismatch)"},
		{"wrong identity", []string{"--bundle", f.bundle, "--certificate-identity", "eve@example.com", f.rec}, 1, `"reason": "identity_mismatch"`, "refused (identity_mismatch)"},
		{"missing inclusion proof", []string{"--bundle", f.noProof, f.rec}, 1, `"reason": "inclusion_proof"`, "refused (inclusion_proof)"},
		{"wrong log key", []string{"--trusted-root", f.otherLog, "--bundle", f.bundle, f.rec}, 1, `"reason": "tlog_key"`, "refused (tlog_key)"},
		{"expired, logged while valid", []string{"--bundle", f.expired, f.rec}, 0, `"time_source": "tlog:0"`, ""},
		{"expired, no timestamp", []string{"--bundle", f.unstamped, f.rec}, 1, `"reason": "certificate_expired"`, "refused (certificate_expired)"},
		{"public-key bundle", []string{"--bundle", f.keyed, "--key", f.keyPath, f.rec}, 0, `"time_source": "tsa:`, ""},
		{"public-key bundle without --key", []string{"--bundle", f.keyed, f.rec}, 1, `"reason": "key_mismatch"`, "pass that key with --key"},
		{"--key and an identity", []string{"--bundle", f.keyed, "--key", f.keyPath, "--certificate-identity", testIdentity, f.rec}, 2, "", "none of the others can be"},
		{"not a bundle", []string{"--bundle", f.rec, f.rec}, 2, "", "bundle:"},
		{"not a public key", []string{"--bundle", f.keyed, "--key", f.rec, f.rec}, 2, "", "PUBLIC KEY"},
	}
	for _, c := range cases {
		args := append([]string{"evidence", "verify-bundle", "--trusted-root", f.root}, c.args...)
		code, out, errs := runCLI(t, args...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errs, c.msg) {
			t.Errorf("%s: code %d out %q err %q; want %d, stdout containing %q, stderr %q", c.name, code, out, errs, c.code, c.out, c.msg)
		}
	}
}

const (
	testIdentity = "dev@example.com"
	testIssuer   = "https://oauth2.example.com/auth"
)

func TestEvidenceStatementOfRelease(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	b, err := canon.Canonicalize([]byte(signRecordJSON))
	if err != nil {
		t.Fatal(err)
	}
	rec := writeFile(t, dir, "rec.json", string(b))
	if code, _, errs := runCLI(t, "evidence", "--store", store, "add", rec); code != 0 {
		t.Fatalf("add: %q", errs)
	}
	code, d, errs := runCLI(t, "evidence", "--store", store, "release", "r1")
	if code != 0 {
		t.Fatalf("release: %q", errs)
	}
	code, out, errs := runCLI(t, "evidence", "statement", filepath.Join(store, "releases", strings.TrimSpace(d)+".json"))
	if code != 0 || !strings.Contains(out, sign.ReleasePredicateType) || !strings.Contains(out, strings.TrimSpace(d)) {
		t.Fatalf("statement: %d %q %q", code, out, errs)
	}
}
