package attest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func startEngine(t *testing.T) *simengine.Engine {
	t.Helper()
	e, err := simengine.Start(simengine.Config{Model: "m", Profile: simengine.DefaultProfile("e0")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, b := testkit.Get(t, url)
	return resp.StatusCode, b
}

func liveIdentity(t *testing.T, e *simengine.Engine) vllm.Identity {
	t.Helper()
	c := vllm.NewClient(e.URL(), vllm.Options{})
	defer c.Close()
	id, verr := c.Identity(context.Background())
	if verr != nil {
		t.Fatal(verr)
	}
	return id
}

func TestDigestStableAndVerifiable(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := startEngine(t)
	s1, s2 := simkit.Sidecar(t, e, "127.0.0.1:0"), simkit.Sidecar(t, e, "127.0.0.1:0")
	_, p1 := get(t, s1.AttestationURL())
	code, p2 := get(t, s2.AttestationURL())
	if code != 200 || string(p1) != string(p2) {
		t.Fatalf("two sidecars on one process disagree (%d):\n%s\n%s", code, p1, p2)
	}
	if err := canon.VerifyCanonical(p1); err != nil {
		t.Fatalf("payload is not canonical: %v", err)
	}
	// The digest is the canon digest of the payload minus attestation_digest.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p1, &m); err != nil {
		t.Fatal(err)
	}
	var digest string
	_ = json.Unmarshal(m["attestation_digest"], &digest)
	delete(m, "attestation_digest")
	rest, _ := json.Marshal(m)
	c, err := canon.Canonicalize(rest)
	if err != nil || canon.Digest(c) != digest || digest != s1.Digest() {
		t.Fatalf("digest %s does not verify (recomputed %s, err %v)", digest, canon.Digest(c), err)
	}
	k := simengine.Contract(simengine.DefaultCompat("m"))
	if _, fails := attest.Verify(p1, &k, liveIdentity(t, e)); len(fails) != 0 {
		t.Fatalf("Verify of an honest payload: %v", fails)
	}
	s1.Close()
	s2.Close()
	e.Close()
}

func TestVerifyFailures(t *testing.T) {
	e := startEngine(t)
	s := simkit.Sidecar(t, e, "127.0.0.1:0")
	_, raw := get(t, s.AttestationURL())
	k := simengine.Contract(simengine.DefaultCompat("m"))
	live := liveIdentity(t, e)
	other := k
	other.KVHeads = 4
	tests := []struct {
		name     string
		raw      string
		declared fleet.EngineContract
		live     vllm.Identity
		want     string
	}{
		{name: "tampered contract", raw: strings.Replace(string(raw), `"kv_heads":8`, `"kv_heads":4`, 1), live: live, want: "attestation_digest does not match the response"},
		{name: "declared differs", raw: string(raw), declared: other, live: live, want: "contract.kv_heads is 8, expected 4"},
		{name: "restarted process", raw: string(raw), live: vllm.Identity{Version: live.Version, ProcessStart: live.ProcessStart + 5}, want: "engine process started at"},
		{name: "other build live", raw: string(raw), live: vllm.Identity{Version: "0.22.0", ProcessStart: live.ProcessStart}, want: `live /version returned "0.22.0"`},
		{name: "unknown field", raw: strings.Replace(string(raw), `{`, `{"x":1,`, 1), live: live, want: "unknown field(s): x"},
		{name: "not an object", raw: `[1]`, live: live, want: "response is not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.declared.VLLMVersion == "" {
				tc.declared = k
			}
			_, fails := attest.Verify([]byte(tc.raw), &tc.declared, tc.live)
			if !strings.Contains(strings.Join(fails, "\n"), tc.want) {
				t.Fatalf("Verify failures %q, want one containing %q", fails, tc.want)
			}
		})
	}
}

func TestRestartLatches503(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := startEngine(t)
	s := simkit.Sidecar(t, e, "127.0.0.1:0")
	for _, route := range []string{"/health", "/v1/attestation"} {
		if code, body := get(t, s.URL()+route); code != 200 {
			t.Fatalf("%s before restart: %d %s", route, code, body)
		}
	}
	e.Restart()
	for i := 0; i < 2; i++ { // stays 503: latched, not a transient read
		for _, route := range []string{"/health", "/v1/attestation"} {
			code, body := get(t, s.URL()+route)
			if code != 503 || !strings.Contains(string(body), "engine process changed; restart the attestation sidecar") {
				t.Fatalf("%s after restart: %d %s", route, code, body)
			}
		}
	}
	// A new sidecar binds to the new process and vouches again.
	s2 := simkit.Sidecar(t, e, "127.0.0.1:0")
	if code, _ := get(t, s2.URL()+"/health"); code != 200 {
		t.Fatalf("restarted sidecar: %d", code)
	}
	if s2.Digest() == s.Digest() {
		t.Fatal("attestation_digest did not change with the process")
	}
	s.Close()
	s2.Close()
	e.Close()
}

func TestUnreadableEngine503(t *testing.T) {
	e := startEngine(t)
	s := simkit.Sidecar(t, e, "127.0.0.1:0")
	e.Close()
	code, body := get(t, s.URL()+"/health")
	if code != 503 || !strings.Contains(string(body), "engine identity unreadable") {
		t.Fatalf("health with the engine gone: %d %s", code, body)
	}
}

func TestVersionMismatchRefusesStart(t *testing.T) {
	e := startEngine(t)
	doc, err := attest.Parse("sim", e.AttestationDocument())
	if err != nil {
		t.Fatal(err)
	}
	doc.Contract.VLLMVersion = "0.22.0"
	c := vllm.NewClient(e.URL(), vllm.Options{})
	defer c.Close()
	_, err = attest.New(context.Background(), attest.Options{Document: doc, Engine: c, EngineBase: e.URL()})
	if !errors.Is(err, attest.ErrVersionMismatch) || !strings.Contains(err.Error(), `runs vLLM "0.21.0", document expects "0.22.0"`) {
		t.Fatalf("New = %v", err)
	}
}
