package fleet

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustParse(t *testing.T, data []byte, lookup LookupFunc) *Config {
	t.Helper()
	cfg, err := Parse("fleet.json", data, lookup)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return cfg
}

func TestCompleteExample(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Engines[0].URL; got != "http://10.0.0.10:8000" {
		t.Errorf("p0 url = %q, want the trailing '/' removed", got)
	}
	if cfg.Engines[2].Role != Decode || cfg.Engines[0].Role != Prefill || !cfg.Engines[0].Pin {
		t.Errorf("roles/pins = %+v", cfg.Engines)
	}
	if cfg.Engine.ControlConnections != 8 {
		t.Errorf("control_connections = %d, want max(4, 2×4) = 8", cfg.Engine.ControlConnections)
	}
	if !cfg.EngineContract.Complete() {
		t.Errorf("example contract missing %v", cfg.EngineContract.Missing())
	}
	if cfg.Serving.MaxAttempts != 2 || cfg.Serving.QueueCapacity != 64 {
		t.Errorf("serving = %+v", cfg.Serving)
	}
}

func TestMinimalExampleDefaults(t *testing.T) {
	cfg, err := Load("../../examples/fleet.minimal.json")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Model = "m"
	want.Engines = []Engine{{IID: "e0", URL: "http://127.0.0.1:8101", Role: Decode}}
	want.SLO = SLO{TTFT: 1, TPOT: 0.05}
	want.Engine.ControlConnections = 4
	if diff := cmp.Diff(&want, cfg); diff != "" {
		t.Errorf("minimal fleet (-want +got):\n%s", diff)
	}
}

// Inputs that must load cleanly, each a change to the complete example.
func TestValidVariants(t *testing.T) {
	cases := []struct {
		name string
		muts []mutation
		env  map[string]string
		chk  func(t *testing.T, c *Config)
	}{
		{name: "annotations everywhere", muts: m(set("_a", []any{1}), set("engines[0]._b", nil), set("slo._c", "x"),
			set("controller._d", 1), set("controller.thresholds._e", true), set("controller.reactive._", "x"),
			set("serving._f", 1), set("engine._g", 1), set("recovery._h", 1), set("recovery.health._i", 1),
			set("profiles._j", 1), set("hardware._k", 1), set("engine_contract._l", 1))},
		{name: "null sections are absent", muts: m(set("controller", nil), set("serving", nil), set("engine", nil),
			set("recovery", nil), set("profiles", nil), set("hardware", nil)),
			chk: func(t *testing.T, c *Config) {
				if c.Hardware != nil || c.Serving.MaxConnections != 512 {
					t.Errorf("hardware %v, max_connections %d", c.Hardware, c.Serving.MaxConnections)
				}
			}},
		{name: "null thresholds", muts: m(set("controller.thresholds", nil)),
			chk: func(t *testing.T, c *Config) {
				if c.Controller.Thresholds.DwellS != 0 {
					t.Errorf("dwell = %v, want the default 0", c.Controller.Thresholds.DwellS)
				}
			}},
		{name: "null contract with individual restarts", muts: m(set("engine_contract", nil), set("recovery.engine_restart_policy", "individual")),
			chk: func(t *testing.T, c *Config) {
				if c.EngineContract != nil {
					t.Error("contract present")
				}
			}},
		{name: "one engine, both floors 1", muts: m(set("engines", []any{map[string]any{"iid": "e", "url": "http://127.0.0.1:1"}}),
			set("controller.min_decode", "#1"))},
		{name: "zero timeouts that mean off", muts: m(set("engine.decode_read_timeout_s", "#0"), set("recovery.failure_quarantine_s", "#0"),
			set("serving.graceful_timeout_s", "#0"))},
		{name: "graceful 30.0", muts: m(set("serving.graceful_timeout_s", "#30.0"))},
		{name: "serving policy defaults", muts: m(set("serving.queue_capacity", "#0"), set("serving.prefill_concurrency", "#0"),
			set("serving.decode_concurrency", "#0"), set("serving.max_attempts", "#1"), set("serving.handoff_timeout_s", "#0"))},
		{name: "negative liveness with individual", muts: m(set("recovery.liveness_every", "#-1"), set("recovery.engine_restart_policy", "individual"))},
		{name: "incomplete contract with individual", muts: m(set("engine_contract", map[string]any{"vllm_version": "0.11.0"}),
			set("recovery.engine_restart_policy", "individual")),
			chk: func(t *testing.T, c *Config) {
				if n := len(c.EngineContract.Missing()); n != 15 {
					t.Errorf("Missing() has %d fields, want 15: %v", n, c.EngineContract.Missing())
				}
			}},
		{name: "literal dollars stay literal", muts: m(set("engines[0].url", "http://h/$NOT_A_REF"), set("model", "${X}"), set("profiles.path", "~/runs/p.json")),
			chk: func(t *testing.T, c *Config) {
				if c.Engines[0].URL != "http://h/$NOT_A_REF" || c.Model != "${X}" || c.Profiles.Path != "~/runs/p.json" {
					t.Errorf("got url %q model %q path %q", c.Engines[0].URL, c.Model, c.Profiles.Path)
				}
			}},
		{name: "ipv6 reference", muts: m(set("engines[0].url", "${V6}")), env: map[string]string{"V6": "http://[::1]:8002/"},
			chk: func(t *testing.T, c *Config) {
				if c.Engines[0].URL != "http://[::1]:8002" {
					t.Errorf("url = %q", c.Engines[0].URL)
				}
			}},
		{name: "attestation reference kept as resolved", muts: m(set("engines[1].attestation_url", "${ATT}")), env: map[string]string{"ATT": "http://h:8010/v1/attestation/"},
			chk: func(t *testing.T, c *Config) {
				if c.Engines[1].AttestationURL != "http://h:8010/v1/attestation/" {
					t.Errorf("attestation_url = %q", c.Engines[1].AttestationURL)
				}
			}},
		{name: "many trailing slashes", muts: m(set("engines[1].url", "http://10.0.0.10:8000///")),
			chk: func(t *testing.T, c *Config) {
				if c.Engines[1].URL != "http://10.0.0.10:8000" {
					t.Errorf("url = %q", c.Engines[1].URL)
				}
			}},
		{name: "empty iid", muts: m(set("engines[0].iid", ""))},
		{name: "paths normalised", muts: m(set("profiles.path", "./runs//p/"), set("recovery.state_path", "a/../b"), set("engine.first_token_calibration_path", "")),
			chk: func(t *testing.T, c *Config) {
				if c.Profiles.Path != "runs/p" || c.Recovery.StatePath != "a/../b" || c.Engine.FirstTokenCalibrationPath != "" {
					t.Errorf("paths %q %q %q", c.Profiles.Path, c.Recovery.StatePath, c.Engine.FirstTokenCalibrationPath)
				}
			}},
		{name: "empty profile path", muts: m(set("profiles.path", "")),
			chk: func(t *testing.T, c *Config) {
				if c.Profiles.Path != "." || c.JournalPath() != "journal.jsonl" {
					t.Errorf("path %q journal %q", c.Profiles.Path, c.JournalPath())
				}
			}},
		{name: "int given to a number field", muts: m(set("slo.ttft_s", "#2")),
			chk: func(t *testing.T, c *Config) {
				if c.SLO.TTFT != 2 {
					t.Errorf("ttft = %v", c.SLO.TTFT)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := exampleDoc(t)
			for _, mu := range tc.muts {
				mu(t, doc)
			}
			cfg := mustParse(t, encode(t, doc), env(tc.env))
			if tc.chk != nil {
				tc.chk(t, cfg)
			}
		})
	}
}

// [narwhal] deviation: the reference lets the last duplicate win silently.
func TestDuplicateKeysAreRefused(t *testing.T) {
	data := []byte(`{"schema":"narwhal.fleet","schema_version":1,"model":"a","model":"b",
		"engines":[{"iid":"e","url":"http://e"}],"slo":{"ttft_s":1,"tpot_s":1}}`)
	_, err := Parse("fleet.json", data, noEnv)
	var le *LoadError
	if !errors.As(err, &le) || len(le.Problems) != 1 || !hasProblem(le.Problems, want{"model", "model appears more than once in one object"}) {
		t.Errorf("err = %v, want one duplicate-key problem at model", err)
	}
}

func TestJournalPath(t *testing.T) {
	for in, want := range map[string]string{
		"runs/profiles.json":   "runs/journal.jsonl",
		"profiles.json":        "journal.jsonl",
		"/srv/p/profiles.json": "/srv/p/journal.jsonl",
	} {
		c := Config{Profiles: Profiles{Path: in}}
		if got := c.JournalPath(); got != want {
			t.Errorf("JournalPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"./runs/profiles.json": "runs/profiles.json",
		"runs//x/":             "runs/x",
		"a/../b":               "a/../b",
		"":                     ".",
		".":                    ".",
		"/abs//p/./q":          "/abs/p/q",
		"//x":                  "/x",
	} {
		if got := cleanPath(in); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContractFingerprint(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.EngineContract
	wantText := `{"attention_backend":"FLASH_ATTN","connector":"NixlConnector","cross_layers_blocks":false,"enforce_handshake_compat":true,"head_size":128,"hidden_layers":64,"hybrid_kv_cache_manager":false,"image_digest":"sha256:0cde59af70e00b206e8f88346edface9e2d9373fc54dc13d175f704d73718768","kv_cache_dtype":"auto","kv_heads":8,"kv_role":"kv_both","model_architecture":"Qwen3ForCausalLM","model_dtype":"bfloat16","nixl_connector_version":2,"nixl_version":"0.6.1","speculative_config":"disabled","transfer_mode":"pull","vllm_version":"0.11.0"}`
	if got := k.canonicalText(); got != wantText {
		t.Errorf("canonical text:\n got %s\nwant %s", got, wantText)
	}
	if got := k.Fingerprint(); got != "e9d4e82492db076a" {
		t.Errorf("fingerprint = %s, want e9d4e82492db076a", got)
	}
	minimal := DefaultContract()
	minimal.VLLMVersion = "0.11.0"
	if got := minimal.Fingerprint(); got != "4d235d55b4b7f129" {
		t.Errorf("minimal fingerprint = %s, want 4d235d55b4b7f129", got)
	}
}

func TestPyString(t *testing.T) {
	for in, want := range map[string]string{
		`plain/<>&`:  `"plain/<>&"`,
		"q\"b\\":     `"q\"b\\"`,
		"\b\f\n\r\t": `"\b\f\n\r\t"`,
		"\x00\x7f":   `"\u0000\u007f"`,
		"é":          `"\u00e9"`,
		"😀":          `"\ud83d\ude00"`,
	} {
		if got := pyString(in); got != want {
			t.Errorf("pyString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestMissing(t *testing.T) {
	k := DefaultContract()
	k.VLLMVersion = "x"
	f := false
	k.CrossLayersBlocks = &f
	k.KVHeads = 8
	got := k.Missing()
	for _, declared := range []string{"cross_layers_blocks", "kv_heads"} {
		for _, g := range got {
			if g == declared {
				t.Errorf("%s is declared but listed missing", declared)
			}
		}
	}
	if len(got) != 13 {
		t.Errorf("Missing() = %v, want 13 fields", got)
	}
}

func TestLoadFromEnv(t *testing.T) {
	t.Setenv("NARWHAL_FLEET", "")
	if _, err := LoadFromEnv(); err == nil || err.Error() != "set NARWHAL_FLEET to a fleet config file" {
		t.Errorf("unset: err = %v", err)
	}
	t.Setenv("NARWHAL_FLEET", "../../examples/fleet.minimal.json")
	cfg, err := LoadFromEnv()
	if err != nil || cfg.Model != "m" {
		t.Errorf("cfg %v, err %v", cfg, err)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	c := Defaults()
	c.Model = "m"
	c.Engines = []Engine{{IID: "a", URL: "http://a:8000", Role: Prefill}, {IID: "b", URL: "http://b:8000", Role: Decode}}
	c.SLO = SLO{TTFT: 1, TPOT: 0.05}
	if err := c.Validate("code"); err != nil {
		t.Fatal(err)
	}
	if c.Engine.ControlConnections != 4 {
		t.Errorf("control_connections = %d, want 4", c.Engine.ControlConnections)
	}
	c.Serving.MaxAttempts = 2 // retries with no handoff bound
	err := c.Validate("code")
	if err == nil || !hasProblem(err.(*LoadError).Problems, want{"serving.handoff_timeout_s", "queued or retried"}) {
		t.Errorf("err = %v, want the serving policy rechecked", err)
	}
	c.Serving.MaxAttempts = 1
	c.Engines[1].URL, c.Engines[1].IID = "b:8000", "a"
	err = c.Validate("code")
	var le *LoadError
	if !errors.As(err, &le) || len(le.Problems) != 2 ||
		!hasProblem(le.Problems, want{"engines[1].url", "it has no scheme"}) ||
		!hasProblem(le.Problems, want{"engines[1].iid", "repeats an instance id 'a'"}) {
		t.Errorf("err = %v, want the engine URL and iid rules applied to code-built configs", err)
	}
}

func TestSaveRoundTripOfExample(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "fleet.json")
	if err := cfg.Save(p); err != nil {
		t.Fatal(err)
	}
	again, err := Load(p)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if diff := cmp.Diff(cfg, again); diff != "" {
		t.Errorf("round trip (-saved +loaded):\n%s", diff)
	}
	data, _ := os.ReadFile(p)
	if want := "{\n  \"schema\": \"narwhal.fleet\",\n  \"schema_version\": 1,\n  \"model\""; string(data[:len(want)]) != want {
		t.Errorf("saved document starts %q", data[:60])
	}
	for _, absent := range []string{"_comment", "_note"} {
		if bytes.Contains(data, []byte(absent)) {
			t.Errorf("saved document keeps annotation %s", absent)
		}
	}
}

func TestAPIKey(t *testing.T) {
	e := EngineSettings{}
	if k, err := e.APIKey(noEnv); k != "" || err != nil || e.AuthMode() != "boundary" {
		t.Errorf("no variable named: %q %v %s", k, err, e.AuthMode())
	}
	e.EngineAPIKeyEnv = "NARWHAL_ENGINE_KEY"
	if _, err := e.APIKey(noEnv); err == nil || !strings.Contains(err.Error(), "engine_api_key_env NARWHAL_ENGINE_KEY is not set in the environment") {
		t.Errorf("unset: err = %v", err)
	}
	k, err := e.APIKey(env(map[string]string{"NARWHAL_ENGINE_KEY": "tok"}))
	if k != "tok" || err != nil || e.AuthMode() != "engine-credential" {
		t.Errorf("set: %q %v", k, err)
	}
}
