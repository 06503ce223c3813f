package sigbundle

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"google.golang.org/protobuf/proto"

	"github.com/narwhal-go/narwhal/internal/evidence/sigbundle/sigbundletest"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
)

const (
	identity = "dev@example.com"
	issuer   = "https://oauth2.example.com/auth"
)

// rec is a canonical evidence record, the artifact narwhal signs.
var rec = []byte(`{"claim":{"quantity":"boot","tolerance":0,"unit":"","value":null,"verdict":"healthy"},"claim_scope":"boot","corrects":null,"display":{},"engine":{"name":"vllm","packages":[],"version":"0.11.0"},"epistemic_status":"measured","kind":"boot","level":"community_reported","license":"CDLA-Permissive-2.0","observed_at":"2026-09-10T12:00:00Z","provenance":{"inputs":[],"producer":"me","producer_version":"0"},"schema":"narwhal.evidence.record","schema_version":1,"subject":{"artifact":"a"}}`)

var otherRec = []byte(`{"a":2}`)

// fixture is one virtual Sigstore and what the cases share.
type fixture struct {
	s, other *sigbundletest.Sigstore
	root     []byte
	payload  []byte // the in-toto Statement of rec
	now      time.Time
	key      *ecdsa.PrivateKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{now: time.Now()}
	var err error
	if f.s, err = sigbundletest.New(rand.Reader, f.now); err != nil {
		t.Fatal(err)
	}
	if f.other, err = sigbundletest.New(rand.Reader, f.now); err != nil {
		t.Fatal(err)
	}
	f.root = f.trustedRoot(t, sigbundletest.RootOptions{})
	st, err := sign.StatementFor(rec)
	if err != nil {
		t.Fatal(err)
	}
	if f.payload, err = st.Encode(); err != nil {
		t.Fatal(err)
	}
	if f.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) trustedRoot(t *testing.T, o sigbundletest.RootOptions) []byte {
	t.Helper()
	b, err := f.s.TrustedRoot(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustFor returns a checker for a builder's (bundle, error) results.
func mustFor(t *testing.T) func(*protobundle.Bundle, error) *protobundle.Bundle {
	return func(b *protobundle.Bundle, err error) *protobundle.Bundle {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func js(t *testing.T, b *protobundle.Bundle) []byte {
	t.Helper()
	out, err := sigbundletest.JSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAccepts: the cases sigstore-go accepts, and what the result says.
// The first two of the old oracle module's cases are here (logged message
// signature, logged DSSE statement); the others are new paths.
func TestAccepts(t *testing.T) {
	f := newFixture(t)
	must := mustFor(t)
	message := must(f.s.MessageBundle(identity, issuer, rec, f.now, false))
	dsse := must(f.s.DSSEBundle(identity, issuer, f.payload, f.now.Add(-time.Minute), f.now, false))
	// Expired now (valid from 11 to 1 minutes ago), logged 90 s ago.
	expired := must(f.s.DSSEBundle(identity, issuer, f.payload, f.now.Add(-11*time.Minute), f.now.Add(-90*time.Second), false))
	v2 := must(f.s.RekorV2Bundle(identity, issuer, f.payload))
	keyed := must(f.s.KeyBundle(f.key, rec))
	cases := []struct {
		name            string
		bundle          *protobundle.Bundle
		in              Input
		content, source string
		log             string
	}{
		{"logged message signature", message, Input{Identity: identity, Issuer: issuer}, "message_signature", "tlog:1000", "rekor_v1"},
		{"logged DSSE statement", dsse, Input{Identity: identity, Issuer: issuer}, "dsse", "tlog:0", "rekor_v1"},
		{"no identity pinned: the result still names it", message, Input{}, "message_signature", "tlog:1000", "rekor_v1"},
		{"expired certificate, logged while valid", expired, Input{Identity: identity}, "dsse", "tlog:0", "rekor_v1"},
		{"Rekor v2 entry with an RFC 3161 timestamp", v2, Input{Issuer: issuer}, "dsse", "tsa:https://virtual.tsa.sigstore.dev", "rekor_v2"},
		{"public-key bundle with an RFC 3161 timestamp", keyed, Input{Key: &f.key.PublicKey}, "message_signature", "tsa:https://virtual.tsa.sigstore.dev", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Bundle, in.TrustedRoot, in.Artifact, in.Now = js(t, c.bundle), f.root, rec, f.now
			res, err := Verify(in)
			if err != nil {
				t.Fatal(err)
			}
			wantID, wantIss := identity, issuer
			if in.Key != nil {
				wantID, wantIss = "", ""
			}
			if !res.Verified || res.Content != c.content || res.TimeSource != c.source || res.Log != c.log ||
				res.Identity != wantID || res.Issuer != wantIss || !strings.HasPrefix(res.Digest, "1220") || res.SignedAt == "" || res.BundleVersion != "v0.3" {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestRefusals: every refusal carries its reason and a one-line message,
// and sigstore-go's own error is kept as the cause.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	for _, c := range refusalCases(t, f) {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Bundle, in.TrustedRoot, in.Now = js(t, c.bundle), c.root, f.now
			if in.TrustedRoot == nil {
				in.TrustedRoot = f.root
			}
			if in.Artifact == nil {
				in.Artifact = rec
			}
			_, err := Verify(in)
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != c.reason || !strings.Contains(err.Error(), c.msg) || strings.Contains(r.Detail, "\n") {
				t.Fatalf("err %v, want refusal %s containing %q", err, c.reason, c.msg)
			}
			t.Logf("%v (sigstore-go: %v)", err, r.Cause)
		})
	}
}

type refusalCase struct {
	name   string
	bundle *protobundle.Bundle
	root   []byte // nil: the fixture's
	in     Input
	reason Reason
	msg    string
}

// refusalCases are the bundles sigstore-go refuses, one or more per
// reason. The old oracle module's five refusing cases come first.
func refusalCases(t *testing.T, f *fixture) []refusalCase {
	must := mustFor(t)
	good := must(f.s.MessageBundle(identity, issuer, rec, f.now, false))
	goodDSSE := must(f.s.DSSEBundle(identity, issuer, f.payload, f.now.Add(-time.Minute), f.now, false))
	v2 := must(f.s.RekorV2Bundle(identity, issuer, f.payload))
	keyed := must(f.s.KeyBundle(f.key, rec))
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return []refusalCase{
		{"bundle for another digest", good, nil, Input{Artifact: otherRec}, ReasonDigest, "but the artifact's SHA-256 is"},
		{"logged after the certificate expired", must(f.s.MessageBundle(identity, issuer, rec, f.now.Add(20*time.Minute), false)), nil, Input{}, ReasonExpired, "not valid at the log's integrated time"},
		{"another CA and log", must(f.other.MessageBundle(identity, issuer, rec, f.now, false)), nil, Input{}, ReasonTlogKey, "does not name"},
		{"wrong identity", good, nil, Input{Identity: "eve@example.com", Issuer: issuer}, ReasonIdentity, `expected SAN value "eve@example.com", got "dev@example.com"`},
		{"DSSE statement for another record", goodDSSE, nil, Input{Artifact: otherRec}, ReasonDigest, "does not sign this artifact"},
		{"wrong issuer", good, nil, Input{Issuer: "https://accounts.example.org"}, ReasonIdentity, "issuer"},
		{"missing inclusion proof", edit(good, func(b *protobundle.Bundle) { b.VerificationMaterial.TlogEntries[0].InclusionProof = nil }), nil, Input{}, ReasonInclusionProof, "no inclusion proof"},
		{"tampered inclusion proof", edit(good, func(b *protobundle.Bundle) { b.VerificationMaterial.TlogEntries[0].InclusionProof.RootHash[0] ^= 1 }), nil, Input{}, ReasonInclusionProof, "inclusion proof does not verify"},
		{"tampered Rekor v2 checkpoint", edit(v2, func(b *protobundle.Bundle) {
			cp := b.VerificationMaterial.TlogEntries[0].InclusionProof.Checkpoint
			cp.Envelope = strings.Replace(cp.Envelope, "\n1\n", "\n2\n", 1) // the tree size the log signed
		}), nil, Input{}, ReasonInclusionProof, "inclusion proof does not verify"},
		{"wrong log key", good, f.trustedRoot(t, sigbundletest.RootOptions{RekorFrom: f.other}), Input{}, ReasonTlogKey, "does not name"},
		{"tampered signed entry timestamp", edit(good, func(b *protobundle.Bundle) { b.VerificationMaterial.TlogEntries[0].IntegratedTime++ }), nil, Input{}, ReasonTlogPromise, "signed entry timestamp does not verify"},
		{"not logged", edit(good, func(b *protobundle.Bundle) { b.VerificationMaterial.TlogEntries = nil }), nil, Input{}, ReasonTlogMissing, "no transparency-log entry"},
		{"expired certificate without a timestamp", edit(must(f.s.DSSEBundle(identity, issuer, f.payload, f.now.Add(-11*time.Minute), f.now.Add(-90*time.Second), false)),
			func(b *protobundle.Bundle) { b.VerificationMaterial.TlogEntries[0].InclusionPromise = nil }), nil, Input{}, ReasonExpired, "has expired, and no verified timestamp"},
		{"Rekor v2 without a timestamp", edit(v2, func(b *protobundle.Bundle) { b.VerificationMaterial.TimestampVerificationData = nil }), nil, Input{}, ReasonTimestamp, "the bundle carries none"},
		{"another Fulcio", good, f.trustedRoot(t, sigbundletest.RootOptions{FulcioFrom: f.other}), Input{}, ReasonUntrusted, "does not chain"},
		{"no SCT where the root names a CT log", good, f.trustedRoot(t, sigbundletest.RootOptions{CTLogs: true}), Input{}, ReasonSCT, "no SCT"},
		{"log entry of another signature", edit(good, func(b *protobundle.Bundle) {
			b.VerificationMaterial.TlogEntries = must(f.s.MessageBundle(identity, issuer, otherRec, f.now, false)).VerificationMaterial.TlogEntries
		}), nil, Input{}, ReasonTlogEntry, "does not record this bundle's signature"},
		{"public-key bundle, another key", keyed, nil, Input{Key: &otherKey.PublicKey}, ReasonSignature, "does not verify"},
		{"public-key bundle, altered signature", edit(keyed, func(b *protobundle.Bundle) {
			b.GetMessageSignature().Signature[8] ^= 1
			if err := f.s.Restamp(b); err != nil {
				t.Fatal(err)
			}
		}), nil, Input{Key: &f.key.PublicKey}, ReasonSignature, "does not verify"},
		{"RFC 3161 timestamp over another signature", edit(keyed, func(b *protobundle.Bundle) { b.GetMessageSignature().Signature[8] ^= 1 }), nil, Input{Key: &f.key.PublicKey}, ReasonTimestamp, "hashed messages don't match"},
		{"public-key bundle without --key", keyed, nil, Input{}, ReasonKey, "pass that key with --key"},
		{"certificate bundle with --key", good, nil, Input{Key: &f.key.PublicKey}, ReasonKey, "signed with a certificate"},
	}
}

// edit changes a copy of b.
func edit(b *protobundle.Bundle, change func(*protobundle.Bundle)) *protobundle.Bundle {
	c := cloneBundle(b)
	change(c)
	return c
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	must := mustFor(t)
	good := js(t, must(f.s.MessageBundle(identity, issuer, rec, f.now, false)))
	cases := []struct {
		name string
		in   Input
		msg  string
	}{
		{"not JSON", Input{Bundle: []byte(`{`), TrustedRoot: f.root, Artifact: rec}, "bundle:"},
		{"not a bundle", Input{Bundle: rec, TrustedRoot: f.root, Artifact: rec}, "bundle:"},
		{"not a trusted root", Input{Bundle: good, TrustedRoot: []byte(`{"mediaType":"x"}`), Artifact: rec}, "trusted root"},
		{"key and identity", Input{Bundle: good, TrustedRoot: f.root, Artifact: rec, Key: &f.key.PublicKey, Identity: identity}, "exclude each other"},
		{"no artifact", Input{Bundle: good, TrustedRoot: f.root}, "no artifact"},
	}
	for _, c := range cases {
		_, err := Verify(c.in)
		var r *Refusal
		if err == nil || errors.As(err, &r) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want bad input containing %q", c.name, err, c.msg)
		}
	}
}

// TestPublicGoodBundle verifies a bundle Sigstore's public instance made
// (sigstore-js 2.0.0's npm provenance, shipped in sigstore-go's test data)
// against the public-good trusted root: a real Fulcio chain with an
// embedded SCT, a real Rekor promise and inclusion proof. Offline.
func TestPublicGoodBundle(t *testing.T) {
	b, root := sigbundletest.PublicGood(t)
	digest, _ := hex.DecodeString("46d4e2f74c4877316640000a6fdf8a8b59f1e0847667973e9859f774dd31b8f1e0937813b777fb66a2ac67d50540fe34640966eee9fc2ccca387082b4c85cd3c")
	in := Input{Bundle: b, TrustedRoot: root, Digest: &Digest{Algorithm: "sha512", Value: digest},
		Identity: "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main", Issuer: "https://token.actions.githubusercontent.com"}
	res, err := Verify(in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Log != "rekor_v1" || res.BundleVersion != "v0.1" || !strings.HasPrefix(res.TimeSource, "tlog:") || res.Content != "dsse" {
		t.Fatalf("%+v", res)
	}
	digest[0] ^= 1
	if _, err := Verify(in); !isReason(err, ReasonDigest) {
		t.Fatalf("another digest: %v", err)
	}
}

func isReason(err error, r Reason) bool {
	var ref *Refusal
	return errors.As(err, &ref) && ref.Reason == r
}

func cloneBundle(b *protobundle.Bundle) *protobundle.Bundle {
	return proto.Clone(b).(*protobundle.Bundle)
}
