package sweep

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// TestGenerationAttestedThroughProbe: with a contract the sweep's
// generation is read through probe — the attestation the sidecar served,
// verified against the contract and the live process, is bound into the
// digest — and probe's refusals come back as the sweep's errors.
func TestGenerationAttestedThroughProbe(t *testing.T) {
	e, tgt := startSim(t, nil)
	sc := simkit.Sidecar(t, e, "127.0.0.1:0")
	contract := simengine.Contract(e.Compat())
	other := contract
	other.VLLMVersion = "0.0.1"
	for _, tc := range []struct {
		name     string
		url      string
		contract *fleet.EngineContract
		err      string
	}{
		{"attested", sc.AttestationURL(), &contract, ""},
		{"no attestation_url", "", &contract, "attestation_url is not configured"},
		{"another contract", sc.AttestationURL(), &other, "attestation"},
		{"uncontracted", "", nil, ""},
	} {
		cfg := &fleet.Config{Engines: []fleet.Engine{{IID: tgt.IID, URL: e.URL(), AttestationURL: tc.url}}, EngineContract: tc.contract}
		tgt.Contract = tc.contract
		tgt.Probes = probe.New(cfg, probe.Options{Clients: func(string) *vllm.Client { return tgt.Client }})
		m := &meter{t: tgt, probes: tgt.prober()}
		g, err := m.generation(context.Background())
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.err)
			}
			continue
		case err != nil:
			t.Fatalf("%s: %v", tc.name, err)
		}
		att := ""
		if tc.contract != nil {
			if len(g.Attestation) == 0 {
				t.Fatalf("%s: no attestation kept for the samples file", tc.name)
			}
			att = attestationDigest(t, g.Attestation)
		}
		want, _ := profile.Generation(g.Identity.Version, g.Identity.ProcessStart, att)
		if g.Digest != want || (tc.contract != nil) == (len(g.Attestation) == 0) {
			t.Errorf("%s: digest %s, want %s (attestation %q)", tc.name, g.Digest, want, att)
		}
	}
}

// attestationDigest is the digest a served payload names.
func attestationDigest(t *testing.T, raw []byte) string {
	t.Helper()
	var p struct {
		Digest string `json:"attestation_digest"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.Digest == "" {
		t.Fatalf("attestation payload without a digest: %v", err)
	}
	return p.Digest
}
