package probe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// TestAttestation: every stage an attestation can fail at, with the one
// message preflight, readmission and finalisation all show. The router's
// TestReadmissionStopsAtAFailedAttestation (a sidecar still bound to the
// old process) and TestAttestationGateFailsWithoutAttestationURL are the
// sidecar and attestation_url rows.
func TestAttestation(t *testing.T) {
	declared := simengine.Contract(simengine.DefaultCompat("m"))
	tests := []struct {
		name     string
		setup    func(f *simFleet, cfg *fleet.Config)
		declared *fleet.EngineContract
		stage    string // "" passes
		message  string
	}{
		{name: "attested", declared: &declared},
		{name: "attested without a declared contract", setup: kvHeads4},
		{name: "contract differs", setup: kvHeads4, declared: &declared, stage: probe.StageVerify,
			message: "e0 attestation at http://"},
		{name: "no attestation_url", declared: &declared, stage: probe.StageURL,
			setup:   func(_ *simFleet, cfg *fleet.Config) { cfg.Engines[0].AttestationURL = "" },
			message: "attestation_url is not configured for e0: engine_contract needs a narwhal-attest sidecar beside every engine (set engines[0].attestation_url)"},
		{name: "restarted engine, stale sidecar", declared: &declared, stage: probe.StageSidecar,
			setup:   func(f *simFleet, _ *fleet.Config) { f.engines[0].Restart() },
			message: "engine process changed; restart the attestation sidecar"},
		{name: "engine gone", declared: &declared, stage: probe.StageIdentity,
			setup:   func(f *simFleet, _ *fleet.Config) { f.engines[0].Close() },
			message: "e0 engine identity unreadable (/version and process_start_time_seconds on /metrics): "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, 1, nil)
			cfg := f.config(t, `"health_timeout_s":1`)
			if tc.setup != nil {
				tc.setup(f, cfg)
			}
			p := newProber(t, cfg, probe.Options{})
			payload, err := p.Attestation(context.Background(), "e0", tc.declared)
			var ae *probe.AttestError
			switch {
			case tc.stage == "" && (err != nil || payload == nil || payload.AttestationDigest == ""):
				t.Fatalf("Attestation = %+v, %v; want a verified payload", payload, err)
			case tc.stage != "" && (!errors.As(err, &ae) || ae.Stage != tc.stage || !strings.Contains(err.Error(), tc.message)):
				t.Fatalf("Attestation error %v; want stage %s with %q", err, tc.stage, tc.message)
			}
			if tc.stage == probe.StageVerify && !slices.Contains(ae.Fails, "contract.kv_heads is 4, expected 8") {
				t.Fatalf("fails %q do not name the differing field", ae.Fails)
			}
		})
	}
}

// kvHeads4 restarts e0 with 4 KV heads (the default is 8) and its
// sidecar beside the new process.
func kvHeads4(f *simFleet, cfg *fleet.Config) {
	id := simengine.DefaultCompat("m")
	id.NumKVHeads = 4
	f.engines[0].RestartAs(id)
	f.sidecars[0].Close()
	f.sidecars[0] = simkit.Sidecar(f.t, f.engines[0], "127.0.0.1:0")
	cfg.Engines[0].AttestationURL = f.sidecars[0].AttestationURL()
}

// fakeIdentity serves /version and a /metrics without
// process_start_time_seconds, as vLLM with several API servers does.
func fakeIdentity(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"version":"0.21.0"}`) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "vllm:num_requests_running 0\n") })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// TestLiveIdentity: a missing process start is tolerated (start 0) only
// on an uncontracted fleet; Identity always requires it.
func TestLiveIdentity(t *testing.T) {
	url := fakeIdentity(t)
	for _, contracted := range []bool{false, true} {
		t.Run(fmt.Sprintf("contracted=%v", contracted), func(t *testing.T) {
			cfg := fleetOf(t, []string{url}, []string{""}, "")
			if contracted {
				k := simengine.Contract(simengine.DefaultCompat("m"))
				cfg.EngineContract = &k
			}
			p := newProber(t, cfg, probe.Options{})
			id, e := p.LiveIdentity(context.Background(), "e0")
			if contracted != (e != nil) || (!contracted && (id.Version != "0.21.0" || id.ProcessStart != 0)) {
				t.Fatalf("LiveIdentity = %+v, %v", id, e)
			}
			if _, e := p.Identity(context.Background(), "e0"); e == nil || !strings.Contains(fault.As(e).Msg, "process_start_time_seconds") {
				t.Fatalf("Identity without a process start: %v", e)
			}
		})
	}
}
