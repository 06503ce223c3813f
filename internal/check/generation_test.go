package check_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/profile"
)

// TestProfileGenerationBinding: a row bound to the engine's live
// generation (profile.Generation of its verified attestation, what
// narwhal-profile writes) passes the profile gate; a stale one fails,
// naming the engine and how to re-profile it.
func TestProfileGenerationBinding(t *testing.T) {
	tf := startFleet(t, 2, nil)
	defer closeAll(tf)
	raw, err := attest.Fetch(context.Background(), http.DefaultClient, tf.sidecars[0].AttestationURL())
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Digest string `json:"attestation_digest"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	live, err := profile.Generation("", 0, p.Digest)
	if err != nil {
		t.Fatal(err)
	}
	stale := "sha256:" + strings.Repeat("cd", 32)
	tf.store.Profiles[0].GenerationDigest = &live
	tf.store.Profiles[1].GenerationDigest = &stale
	r := tf.run(t, nil)
	text := dump(r)
	if !strings.Contains(text, "e0 profile generation "+live) {
		t.Errorf("e0's live-bound row did not pass:\n%s", text)
	}
	if r.Gate(check.GateProfile).Outcome != check.Failed || !strings.Contains(text, "re-profile it with narwhal-profile --engines e1") {
		t.Errorf("e1's stale row did not fail with the re-profile advice:\n%s", text)
	}
}
