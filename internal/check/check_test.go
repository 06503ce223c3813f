package check_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// testFleet is n simengines, each with its own attestation sidecar, and
// the fleet document that contracts them.
type testFleet struct {
	engines  []*simengine.Engine
	sidecars []*attest.Server
	cfg      *fleet.Config
	store    *profile.Store
}

func startFleet(t *testing.T, n int, tweak func(i int, c *simengine.Config)) *testFleet {
	t.Helper()
	tf := &testFleet{store: &profile.Store{Schema: "narwhal.profiles", SchemaVersion: 1}}
	tf.engines, tf.sidecars = simkit.Fleet(t, n, tweak)
	for i := range n {
		tf.store.Profiles = append(tf.store.Profiles, simkit.FastRow(fmt.Sprintf("e%d", i)))
	}
	tf.cfg = fleetFor(t, tf)
	return tf
}

func fleetFor(t *testing.T, tf *testFleet) *fleet.Config {
	t.Helper()
	k := simengine.Contract(simengine.DefaultCompat("m"))
	var engines []string
	for i, e := range tf.engines {
		engines = append(engines, fmt.Sprintf(`{"iid":"e%d","url":%q,"attestation_url":%q,"role":%q}`,
			i, e.URL(), tf.sidecars[i].AttestationURL(), []string{"prefill", "decode"}[i%2]))
	}
	kj := fmt.Sprintf(`{"vllm_version":%q,"image_digest":%q,"nixl_version":%q,"nixl_connector_version":%d,"model_architecture":%q,"model_dtype":%q,"kv_heads":%d,"head_size":%d,"hidden_layers":%d,"attention_backend":%q,"kv_cache_dtype":%q,"cross_layers_blocks":%t,"hybrid_kv_cache_manager":%t,"connector":"NixlConnector","kv_role":"kv_both","transfer_mode":"pull","speculative_config":"disabled","enforce_handshake_compat":true}`,
		k.VLLMVersion, k.ImageDigest, k.NIXLVersion, k.NIXLConnectorVersion, k.ModelArchitecture, k.ModelDtype,
		k.KVHeads, k.HeadSize, k.HiddenLayers, k.AttentionBackend, k.KVCacheDtype, *k.CrossLayersBlocks, *k.HybridKVCacheManager)
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[` + strings.Join(engines, ",") +
		`],"slo":{"ttft_s":1,"tpot_s":0.05},"hardware":{"accelerator":"NVIDIA H100 80GB HBM3","accelerators_per_engine":1,"tensor_parallel":1},"engine_contract":` + kj + `}`
	cfg, err := fleet.Parse("fleet.json", []byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (tf *testFleet) run(t *testing.T, mod func(*check.Options)) *check.Report {
	t.Helper()
	o := check.Options{Fleet: tf.cfg, Profiles: tf.store, PaceWords: 100}
	if mod != nil {
		mod(&o)
	}
	return check.Run(context.Background(), o)
}

func outcomes(r *check.Report) map[string]check.Outcome {
	m := map[string]check.Outcome{}
	for _, g := range r.Gates {
		m[g.Name] = g.Outcome
	}
	return m
}

func dump(r *check.Report) string {
	var b strings.Builder
	check.WriteText(&b, r)
	return b.String()
}

func TestHealthyFleetPassesEveryGate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tf := startFleet(t, 3, nil)
	r := tf.run(t, nil)
	for _, name := range check.Order {
		if got := outcomes(r)[name]; got != check.Passed {
			t.Fatalf("gate %s = %s, want pass\n%s", name, got, dump(r))
		}
	}
	t.Log(dump(r))
	if !r.Passed() || len(r.Gate(check.GateConsume).Lines) != 6 {
		t.Fatalf("want 6 mesh pairs and a pass:\n%s", dump(r))
	}
	closeAll(tf)
}

func closeAll(tf *testFleet) {
	for _, s := range tf.sidecars {
		s.Close()
	}
	for _, e := range tf.engines {
		e.Close()
	}
}

// TestFailuresStopBeforeKV: each fault fails its gate; a contract, pace
// or restart failure skips produce and consume (no KV moved); a corrupted
// transfer fails consume.
func TestFailures(t *testing.T) {
	tests := []struct {
		name     string
		tweak    func(i int, c *simengine.Config)
		after    func(tf *testFleet)
		gate     string
		message  string
		kvProbed bool
	}{
		{name: "different kv_heads", gate: check.GateContract, message: "e1 attestation: contract.kv_heads is 4, expected 8",
			tweak: func(i int, c *simengine.Config) {
				if i == 1 {
					c.Compat = simengine.DefaultCompat("m")
					c.Compat.NumKVHeads = 4
				}
			}},
		{name: "different vllm_version", gate: check.GateContract, message: "e1 runs vLLM 0.22.0, engine_contract.vllm_version is 0.21.0",
			tweak: func(i int, c *simengine.Config) {
				if i == 1 {
					c.Compat = simengine.DefaultCompat("m")
					c.Compat.VLLMVersion = "0.22.0"
				}
			}},
		{name: "restarted engine", gate: check.GateContract, message: "engine process changed; restart the attestation sidecar",
			after: func(tf *testFleet) { tf.engines[0].Restart() }},
		{name: "2x slower than its profile", gate: check.GatePace, message: "more than 1.5 x profile prefill_time",
			after: func(tf *testFleet) {
				_ = tf.engines[1].SetFaults(simengine.Faults{LatencyMultiplier: 2})
			}},
		{name: "other GPU", gate: check.GateHardware,
			message: `e1: hardware.accelerator is "NVIDIA H100 80GB HBM3", the engine host reports "NVIDIA L4" (GET http://`,
			tweak: func(i int, c *simengine.Config) {
				if i == 1 {
					c.GPU.Name = "NVIDIA L4"
				}
			}},
		{name: "more GPUs than allocated", gate: check.GateHardware,
			message: "e0: hardware.accelerators_per_engine is 1, the engine host reports 2 device(s) (engine",
			tweak: func(i int, c *simengine.Config) {
				if i == 0 {
					c.GPU.Count = 2
				}
			}},
		{name: "corrupted KV transfer", gate: check.GateConsume, message: "the KV arrived corrupted", kvProbed: true,
			after: func(tf *testFleet) { _ = tf.engines[0].SetFaults(simengine.Faults{CorruptKV: true}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			tf := startFleet(t, 2, tc.tweak)
			if tc.after != nil {
				tc.after(tf)
			}
			r := tf.run(t, nil)
			got := outcomes(r)
			if got[tc.gate] != check.Failed || !strings.Contains(dump(r), tc.message) {
				t.Fatalf("gate %s = %s, want fail with %q\n%s", tc.gate, got[tc.gate], tc.message, dump(r))
			}
			if r.Passed() {
				t.Fatal("report passed")
			}
			kv := got[check.GateProduce] != check.Skipped || got[check.GateConsume] != check.Skipped
			if kv != tc.kvProbed {
				t.Fatalf("KV probes ran = %v, want %v\n%s", kv, tc.kvProbed, dump(r))
			}
			closeAll(tf)
		})
	}
}

// TestHardwareGate: the hardware gate compares what each sidecar
// observed; an accelerator it could not observe is a warning, not a
// failure.
func TestHardwareGate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := []struct {
		name   string
		fleet  func(c *fleet.Config)
		tweak  func(i int, c *simengine.Config)
		opts   func(o *check.Options)
		want   check.Outcome
		status check.Status
		line   string
	}{
		{name: "agrees", want: check.Passed, status: check.OK,
			line: "e0 runs 1 × NVIDIA H100 80GB HBM3, 79.2 GiB, compute capability 9.0 (GET http://"},
		{name: "case and spacing do not matter", want: check.Passed, status: check.OK, line: "e1 runs 1 × NVIDIA H100 80GB HBM3",
			fleet: func(c *fleet.Config) { c.Hardware.Accelerator = "  nvidia  h100 80gb HBM3" }},
		{name: "a prefix is not the product", want: check.Failed, status: check.Fail,
			line:  `e0: hardware.accelerator is "NVIDIA H100", the engine host reports "NVIDIA H100 80GB HBM3"`,
			fleet: func(c *fleet.Config) { c.Hardware.Accelerator = "NVIDIA H100" }},
		{name: "fewer ranks than tensor_parallel", want: check.Failed, status: check.Fail,
			line:  "e0: hardware.tensor_parallel is 2, the engine host reports 1 device(s) (engine",
			fleet: func(c *fleet.Config) { c.Hardware.AcceleratorsPerEngine, c.Hardware.TensorParallel = 2, 2 }},
		// The engine's device report is a /v1 path: with --api-key vLLM
		// refuses the sidecar, which never holds the key.
		{name: "unknown warns", want: check.Passed, status: check.Warn,
			line:  "e0 accelerator unknown (the engine's device report needs its API key, which the sidecar never holds)",
			tweak: func(_ int, c *simengine.Config) { c.APIKey = "k" }, opts: func(o *check.Options) { o.APIKey = "k" }},
		{name: "no hardware block", want: check.Skipped, status: check.Skip, line: "no hardware block declared",
			fleet: func(c *fleet.Config) { c.Hardware = nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf := startFleet(t, 2, tc.tweak)
			if tc.fleet != nil {
				tc.fleet(tf.cfg)
			}
			r := tf.run(t, func(o *check.Options) {
				o.NoKV = true
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			g := r.Gate(check.GateHardware)
			if g.Outcome != tc.want || !hasLine(g, tc.status, tc.line) {
				t.Fatalf("hardware gate %s, want %s with a %s line %q\n%s", g.Outcome, tc.want, tc.status, tc.line, dump(r))
			}
			for _, l := range g.Lines {
				if l.Status == check.Fail && l.FailureKind != check.FailureHardware {
					t.Fatalf("FAIL line without failure_kind %s: %+v", check.FailureHardware, l)
				}
			}
			closeAll(tf)
		})
	}
}

func hasLine(g *check.Gate, s check.Status, substr string) bool {
	for _, l := range g.Lines {
		if l.Status == s && strings.Contains(l.Message, substr) {
			return true
		}
	}
	return false
}

func TestRestartedSidecarPassesAgain(t *testing.T) {
	tf := startFleet(t, 2, nil)
	tf.engines[0].Restart()
	tf.sidecars[0].Close()
	tf.sidecars[0] = simkit.Sidecar(t, tf.engines[0], "127.0.0.1:0")
	tf.cfg = fleetFor(t, tf)
	r := tf.run(t, func(o *check.Options) { o.NoKV = true })
	if got := outcomes(r)[check.GateContract]; got != check.Passed {
		t.Fatalf("a restarted process with a restarted sidecar: contract %s\n%s", got, dump(r))
	}
}
