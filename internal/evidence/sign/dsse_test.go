package sign

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func testRecord(t *testing.T, verdict string) []byte {
	t.Helper()
	v := verdict
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.CommunityReported, Subject: map[string]string{"artifact": "a"},
		Claim:      evidence.Claim{Quantity: "boot", Verdict: &v},
		Engine:     evidence.Engine{Name: "vllm", Version: "0.11.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", ProducerVersion: "0", Inputs: []string{}},
		Display:    map[string]any{},
	}, ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)))
	b, _, err := evidence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testKey(t *testing.T) Key {
	t.Helper()
	k, err := GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signRecord(t *testing.T, k Key, rec []byte) (Envelope, []byte) {
	t.Helper()
	st, err := StatementFor(rec)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return SignPayload(k, PayloadType, payload), payload
}

// TestPAEEncoding is the reference §3.6.3 example.
func TestPAEEncoding(t *testing.T) {
	got := string(PAE("application/vnd.in-toto+json", []byte(`{"a":1}`)))
	if want := `DSSEv1 28 application/vnd.in-toto+json 7 {"a":1}`; got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
	if got := string(PAE("", nil)); got != "DSSEv1 0  0 " {
		t.Fatalf("empty PAE = %q", got)
	}
}

func TestStatementSubjectsAreRecordDigests(t *testing.T) {
	rec := testRecord(t, "healthy")
	st, err := StatementFor(rec)
	if err != nil {
		t.Fatal(err)
	}
	d := canon.Digest(rec)
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != d[4:] || !st.Covers(d) {
		t.Fatalf("subjects %+v, want the record digest %s", st.Subject, d)
	}
	if st.Type != StatementType || st.PredicateType != RecordPredicateType {
		t.Fatalf("type %q predicate %q", st.Type, st.PredicateType)
	}
	if _, err := StatementFor([]byte(`{"b":1, "a":2}`)); err == nil {
		t.Fatal("an uncanonical record was accepted")
	}
}

func TestReleaseStatementCoversManifestAndRecords(t *testing.T) {
	r1, r2 := canon.Digest(testRecord(t, "healthy")), canon.Digest(testRecord(t, "failed"))
	rel, err := evidence.NewRelease("r1", []string{r2, r1})
	if err != nil {
		t.Fatal(err)
	}
	b, md, err := rel.Encode()
	if err != nil {
		t.Fatal(err)
	}
	st, err := StatementFor(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != ReleasePredicateType || len(st.Subject) != 3 || !st.Covers(md) || !st.Covers(r1) || !st.Covers(r2) {
		t.Fatalf("release statement %+v does not cover manifest %s and records", st.Subject, md)
	}
	var p ReleasePredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil || p.ManifestDigest != md || !bytes.Equal(p.Manifest, b) {
		t.Fatalf("predicate %+v err %v", p, err)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := testKey(t)
	rec := testRecord(t, "healthy")
	env, payload := signRecord(t, k, rec)
	pub, err := ParsePublicKey(k.Public.PEM())
	if err != nil {
		t.Fatal(err)
	}
	st, err := Verify(env, payload, pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCovers(st, canon.Digest(rec)); err != nil {
		t.Fatal(err)
	}
	// Ed25519 is deterministic: the same record and key give the same envelope.
	again, _ := signRecord(t, k, rec)
	if again.Signatures[0] != env.Signatures[0] || again.Payload != env.Payload {
		t.Fatal("signing the same record twice gave different envelopes")
	}
	priv, err := ParsePrivateKey(k.PEM())
	if err != nil || !priv.Private.Equal(k.Private) {
		t.Fatalf("private key PEM round trip: %v", err)
	}
}

func TestSignatureDoesNotChangeDigest(t *testing.T) {
	rec := testRecord(t, "healthy")
	before := canon.Digest(rec)
	_, _ = signRecord(t, testKey(t), rec)
	if after := canon.Digest(rec); after != before {
		t.Fatalf("signing changed the record digest %s -> %s", before, after)
	}
}

func TestSigningRefusals(t *testing.T) {
	k, other := testKey(t), testKey(t)
	rec := testRecord(t, "healthy")
	env, payload := signRecord(t, k, rec)

	tamperedPayload := bytes.Replace(payload, []byte(`healthy`), []byte(`failed!`), 1)
	stripped := env
	stripped.Signatures = []Signature{{KeyID: "", Sig: env.Signatures[0].Sig}}
	cases := []struct {
		name    string
		env     Envelope
		payload []byte
		pub     PublicKey
		digest  string // checked with CheckCovers when the envelope verifies
		reason  Reason
		msg     string
	}{
		{"tampered payload", env, tamperedPayload, k.Public, "", ReasonAltered, "altered after signing"},
		{"wrong key", env, payload, other.Public, "", ReasonWrongKey, "not by the supplied key"},
		{"wrong key, no keyid", stripped, payload, other.Public, "", ReasonWrongKey, "not by the supplied key"},
		{"tampered record on disk", env, payload, k.Public, canon.Digest(testRecord(t, "failed")), ReasonDigest, "changed after signing"},
		{"other payload type", SignPayload(k, "text/plain", payload), payload, k.Public, "", ReasonPayload, "payloadType"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Verify(c.env, c.payload, c.pub)
			if err == nil && c.digest != "" {
				err = CheckCovers(st, c.digest)
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != c.reason || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err %v, want refusal %s containing %q", err, c.reason, c.msg)
			}
		})
	}
}

// TestRecordPredicateMustMatchSubject: a signer cannot put one record under
// another record's digest.
func TestRecordPredicateMustMatchSubject(t *testing.T) {
	k := testKey(t)
	st, err := StatementFor(testRecord(t, "healthy"))
	if err != nil {
		t.Fatal(err)
	}
	st.Subject[0].Digest["sha256"] = canon.Digest(testRecord(t, "failed"))[4:]
	payload, _ := st.Encode()
	_, err = Verify(SignPayload(k, PayloadType, payload), payload, k.Public)
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != ReasonDigest {
		t.Fatalf("err %v, want digest_mismatch", err)
	}
}

func TestParseEnvelopeBadInput(t *testing.T) {
	for _, in := range []string{`{`, `{"payloadType":"x","payload":"e30=","signatures":[]}`, `{"payloadType":"x","payload":"!!","signatures":[{"sig":"AA=="}]}`, `{"payload":"e30=","signatures":[{"sig":"AA=="}]}`} {
		if _, _, err := ParseEnvelope([]byte(in)); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
	env := SignPayload(testKey(t), PayloadType, []byte(`{}`))
	b, _ := json.Marshal(env)
	e, p, err := ParseEnvelope(b)
	if err != nil || string(p) != "{}" || e.Payload != base64.StdEncoding.EncodeToString(p) {
		t.Fatalf("%v %q", err, p)
	}
}
