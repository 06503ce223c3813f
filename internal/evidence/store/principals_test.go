package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func acceptance(by string) evidence.Record {
	v := evidence.VerdictAccepted
	return evidence.Stamp(evidence.Record{Kind: evidence.KindAcceptance, ClaimScope: evidence.ScopeConfig, EpistemicStatus: evidence.Derived,
		Level: evidence.MaintainerLabMeasured, Subject: map[string]string{evidence.SubjectPrincipal: by, evidence.SubjectRevision: "1220" + string(bytes.Repeat([]byte("ab"), 32))},
		Claim: evidence.Claim{Quantity: "acceptance", Verdict: &v}, Engine: evidence.Engine{Name: "none", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}}, ports.NewFake(time.Date(2026, 9, 10, 0, 0, 0, 0, time.UTC)))
}

func key(t *testing.T, seed byte) sign.Key {
	t.Helper()
	k, err := sign.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{seed}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Records says an acceptance is signed by its principal only when the
// stored envelope verifies with a key registered for that principal and
// covers the record as stored.
func TestRecordsVerifyAcceptanceSignatures(t *testing.T) {
	alice, mallory := key(t, 1), key(t, 2)
	cases := []struct {
		name     string
		register sign.PublicKey
		signWith *sign.Key
		tamper   bool
		want     string
		why      string
	}{
		{"signed with alice's registered key", alice.Public, &alice, false, "human:alice", ""},
		{"unsigned", alice.Public, nil, false, "", "unsigned"},
		{"signed with a key registered for no one", alice.Public, &mallory, false, "", "refused"},
		{"no key registered for alice", mallory.Public, &alice, false, "", "no key registered for human:alice"},
		{"the envelope is another record's", alice.Public, &alice, true, "", "does not sign"},
	}
	for _, c := range cases {
		s := Open(t.TempDir())
		who := "human:alice"
		if c.register.Key.Equal(mallory.Public.Key) {
			who = "human:mallory"
		}
		if _, err := s.AddPrincipalKey(who, c.register); err != nil {
			t.Fatal(err)
		}
		d, err := s.PutRecord(acceptance("human:alice"))
		if err != nil {
			t.Fatal(err)
		}
		if c.signWith != nil {
			target := d
			if c.tamper {
				target, _ = s.PutRecord(record("healthy")) // sign another record, then file it under d
			}
			if err := s.Sign(target, *c.signWith); err != nil {
				t.Fatal(err)
			}
			if c.tamper {
				os.Rename(filepath.Join(s.Root, signaturesDir, target+".dsse.json"), filepath.Join(s.Root, signaturesDir, d+".dsse.json"))
			}
		}
		rs, err := s.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Digest != d {
				continue
			}
			if r.SignedBy != c.want || (c.why != "" && !bytes.Contains([]byte(r.SignError), []byte(c.why))) {
				t.Errorf("%s: signed by %q (%s), want %q (%s)", c.name, r.SignedBy, r.SignError, c.want, c.why)
			}
		}
	}
}

// Adding a key twice keeps one; a second principal's key keeps the first's.
func TestAddPrincipalKeyKeepsEveryKeyOnce(t *testing.T) {
	s := Open(t.TempDir())
	a, b := key(t, 1), key(t, 2)
	for _, k := range []struct {
		who string
		pub sign.PublicKey
		add bool
	}{{"human:alice", a.Public, true}, {"human:alice", a.Public, false}, {"human:bob", b.Public, true}} {
		if added, err := s.AddPrincipalKey(k.who, k.pub); err != nil || added != k.add {
			t.Fatalf("add %s: added %v err %v, want %v", k.who, added, err, k.add)
		}
	}
	keys, err := s.PrincipalKeys()
	if err != nil || len(keys.Principals["human:alice"]) != 1 || !keys.Registered("human:bob", b.Public) || keys.Registered("human:bob", a.Public) {
		t.Fatalf("registry %+v, err %v", keys, err)
	}
}
