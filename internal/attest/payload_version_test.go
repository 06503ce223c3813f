package attest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// redigest rewrites a payload with edit applied and a freshly computed
// attestation_digest: what an honest sidecar of that shape would serve.
func redigest(t *testing.T, raw []byte, edit func(m map[string]json.RawMessage)) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "attestation_digest")
	edit(m)
	rest, _ := json.Marshal(m)
	c, err := canon.Canonicalize(rest)
	if err != nil {
		t.Fatal(err)
	}
	m["attestation_digest"], _ = json.Marshal(canon.Digest(c))
	out, _ := json.Marshal(m)
	return out
}

// TestPayloadVersions: v2 carries the accelerator under the digest; a v1
// payload (an older sidecar: no accelerator) still verifies, with the
// accelerator unknown; a newer version is refused by name.
func TestPayloadVersions(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := startEngine(t)
	s := simkit.Sidecar(t, e, "127.0.0.1:0")
	_, raw := get(t, s.AttestationURL())
	k := simengine.Contract(simengine.DefaultCompat("m"))
	live := liveIdentity(t, e)
	v1 := redigest(t, raw, func(m map[string]json.RawMessage) {
		delete(m, "accelerator")
		m["schema_version"] = json.RawMessage("1")
	})
	tests := []struct {
		name    string
		raw     []byte
		version int
		acc     string // observed name; "" for none
		fail    string // "" for none
	}{
		{name: "v2", raw: raw, version: 2, acc: simengine.DefaultGPUName},
		{name: "v1 still verifies", raw: v1, version: 1},
		{name: "v1 with an accelerator", raw: redigest(t, v1, func(m map[string]json.RawMessage) { m["accelerator"] = json.RawMessage("{}") }),
			fail: "response: unknown field(s): accelerator"},
		{name: "v2 without one", raw: redigest(t, raw, func(m map[string]json.RawMessage) { delete(m, "accelerator") }),
			fail: "response: missing field(s): accelerator"},
		{name: "newer", raw: redigest(t, raw, func(m map[string]json.RawMessage) { m["schema_version"] = json.RawMessage("3") }),
			fail: "schema_version 3 is newer than this narwhal reads (2); upgrade narwhal"},
		{name: "tampered accelerator", raw: []byte(strings.Replace(string(raw), simengine.DefaultGPUName, "NVIDIA H200", 1)),
			version: 2, acc: "NVIDIA H200", fail: "attestation_digest does not match the response"},
		{name: "bad status", raw: redigest(t, raw, func(m map[string]json.RawMessage) {
			m["accelerator"] = json.RawMessage(strings.Replace(string(m["accelerator"]), `"observed"`, `"maybe"`, 1))
		}), version: 2, fail: `accelerator.status is "maybe", expected observed or unknown`},
		{name: "unknown member", raw: redigest(t, raw, func(m map[string]json.RawMessage) {
			m["accelerator"] = json.RawMessage(strings.Replace(string(m["accelerator"]), `{`, `{"vendor":"x",`, 1))
		}), version: 2, fail: "accelerator: unknown field(s): vendor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fails := attest.Verify(tc.raw, &k, live)
			joined := strings.Join(fails, "\n")
			if tc.fail == "" && len(fails) > 0 || tc.fail != "" && !strings.Contains(joined, tc.fail) {
				t.Fatalf("failures %q, want %q", fails, tc.fail)
			}
			if tc.version == 0 {
				return
			}
			if p == nil || p.SchemaVersion != tc.version || (tc.acc == "") != (p.Accelerator == nil) ||
				tc.acc != "" && p.Accelerator.Name != tc.acc {
				t.Fatalf("decoded %+v, want version %d accelerator %q", p, tc.version, tc.acc)
			}
		})
	}
	s.Close()
	e.Close()
}
