package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
	"github.com/narwhal-go/narwhal/internal/evidence/sign/signtest"
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

func TestEvidenceVerifyBundle(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	ca := signtest.NewCA(rand.Reader, at.AddDate(0, -6, 0))
	leaf := ca.Issue(signtest.Leaf{Identity: "dev@example.com", Issuer: "https://oauth2.example.com/auth", NotBefore: at.Add(-time.Minute), NotAfter: at.Add(9 * time.Minute)})
	root := writeFile(t, dir, "trusted_root.json", string(ca.TrustedRoot()))
	rec := writeFile(t, dir, "rec.json", signRecordJSON)
	other := writeFile(t, dir, "other.json", strings.Replace(signRecordJSON, "healthy", "failed", 1))
	bundle := writeFile(t, dir, "rec.sigstore.json", string(leaf.MessageBundle([]byte(signRecordJSON), at)))
	unlogged := writeFile(t, dir, "unlogged.sigstore.json", string(leaf.MessageBundle([]byte(signRecordJSON), time.Time{})))
	base := []string{"evidence", "verify-bundle", "--trusted-root", root}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--bundle", bundle, "--certificate-identity", "dev@example.com", "--certificate-oidc-issuer", "https://oauth2.example.com/auth", rec}, 0, `"issuer": "https://oauth2.example.com/auth"`},
		{[]string{"--bundle", bundle, other}, 1, "refused (digest_mismatch)"},
		{[]string{"--bundle", unlogged, rec}, 1, "refused (certificate_expired)"}, // the wall clock is past a 10-minute certificate
		{[]string{"--bundle", bundle, "--certificate-identity", "eve@example.com", rec}, 1, "refused (identity_mismatch)"},
		{[]string{"--bundle", rec, rec}, 2, "mediaType"},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, append(base, c.args...)...)
		if code != c.code || !strings.Contains(out+errs, c.msg) {
			t.Errorf("%v: code %d out %q err %q; want %d containing %q", c.args, code, out, errs, c.code, c.msg)
		}
	}
}

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
