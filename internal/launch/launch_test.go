package launch

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vllm", "vllm"},
		{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"},
		{"", "''"},
		{"a b", "'a b'"},
		{`{"kv_role":"kv_both"}`, `'{"kv_role":"kv_both"}'`},
		{"it's", `'it'\''s'`},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
		{"`id`;x", "'`id`;x'"},
		{"a\nb", "'a\nb'"},
	}
	for _, tc := range tests {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestQuoteRoundTripsThroughShell: sh -c 'printf %s <quoted>' prints the
// original bytes for hostile inputs.
func TestQuoteRoundTripsThroughShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, in := range []string{"$(echo pwned)", "it's", "a\"b", "`x`", "a b\tc", "$HOME", "*", "\\n"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(in)).Output()
		if err != nil || string(out) != in {
			t.Errorf("sh printed %q for %q (%v)", out, in, err)
		}
	}
}

func loadFleet(t *testing.T, model, extra string) *fleet.Config {
	t.Helper()
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":` + model + `,"engines":[{"iid":"n0","url":"http://10.0.0.5:8000"},{"iid":"n1","url":"http://node1:8001"}],
"slo":{"ttft_s":1,"tpot_s":0.05},"hardware":{"accelerator":"H100","accelerators_per_engine":2,"tensor_parallel":2},
"engine":{"engine_api_key_env":"NARWHAL_ENGINE_KEY"}` + extra + `}`
	cfg, err := fleet.Parse("fleet.json", []byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestPlan(t *testing.T) {
	cfg := loadFleet(t, `"Qwen/Qwen3-8B"`, `,"engine_contract":{"vllm_version":"0.21.0","model_dtype":"bfloat16","kv_cache_dtype":"auto","kv_role":"kv_both"}`)
	plans, err := Plan(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `vllm serve Qwen/Qwen3-8B --served-model-name Qwen/Qwen3-8B --host 0.0.0.0 --port 8001 --tensor-parallel-size 2 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_connector_extra_config":{"enforce_handshake_compat":true},"kv_role":"kv_both"}' --dtype bfloat16 --kv-cache-dtype auto`
	if got := Join(plans[1].Argv); got != want {
		t.Fatalf("argv\n got %s\nwant %s", got, want)
	}
	if plans[1].Env["VLLM_NIXL_SIDE_CHANNEL_HOST"] != "node1" || plans[1].Env["VLLM_NIXL_SIDE_CHANNEL_PORT"] != "5601" {
		t.Fatalf("env %v", plans[1].Env)
	}
	s := plans[0].Script()
	if !strings.Contains(s, `export VLLM_API_KEY="$NARWHAL_ENGINE_KEY"`) || strings.Count(s, "NARWHAL_ENGINE_KEY") != 3 {
		t.Fatalf("script does not read the credential by name:\n%s", s)
	}
}

// TestHostileModelNameStaysOneArgument: a fleet value full of shell
// syntax reaches vllm as one literal argument.
func TestHostileModelNameStaysOneArgument(t *testing.T) {
	cfg := loadFleet(t, `"x'; rm -rf / #$(id)"`, "")
	plans, err := Plan(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", `for a in "$@"; do printf '[%s]' "$a"; done`+" -- "+Join(plans[0].Argv[:3])).Output()
	if err != nil {
		t.Skip("no sh")
	}
	if string(out) != "[vllm][serve][x'; rm -rf / #$(id)]" {
		t.Fatalf("shell split the model name: %s", out)
	}
}

func TestWrite(t *testing.T) {
	cfg := loadFleet(t, `"m"`, `,"engine_contract":{"vllm_version":"0.21.0"}`)
	plans, _ := Plan(cfg, Options{})
	dir := filepath.Join(t.TempDir(), "engine-launch-20261129T120000Z")
	files, err := Write(dir, cfg, plans)
	if err != nil || len(files) != 6 {
		t.Fatalf("Write: %v %v", files, err)
	}
	doc, err := attest.Load(filepath.Join(dir, "n0", "engine-attestation.json"))
	if err != nil {
		t.Fatalf("skeleton does not load: %v", err)
	}
	if !strings.Contains(doc.Sources["kv_role"], filepath.Join("n0", "launch.json")+" sha256:") ||
		!strings.Contains(doc.Sources["kv_heads"], "checked.json") || !strings.Contains(doc.Sources["attention_backend"], "startup.log") {
		t.Fatalf("sources %v", doc.Sources)
	}
	if _, err := Write(dir, cfg, plans); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("second Write = %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "n0", "launch.sh")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("launch.sh mode %v", fi.Mode())
	}
}

// A fleet without engine.engine_api_key_env would render engines that
// listen on 0.0.0.0 with no API key: Plan refuses unless asked, and an
// allowed unauthenticated plan says so in every file.
func TestPlanRefusesAnUnauthenticatedEngine(t *testing.T) {
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"n0","url":"http://10.0.0.5:8000"}],"slo":{"ttft_s":1,"tpot_s":0.05}}`
	cfg, err := fleet.Parse("fleet.json", []byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	_, err = Plan(cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "engine.engine_api_key_env") || !strings.Contains(err.Error(), "--allow-unauthenticated") {
		t.Fatalf("Plan without a credential variable = %v, want a refusal naming engine.engine_api_key_env and --allow-unauthenticated", err)
	}
	plans, err := Plan(cfg, Options{AllowUnauthenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	s := plans[0].Script()
	if !plans[0].Unauthenticated || !strings.Contains(s, "# WARNING: UNAUTHENTICATED") || !strings.Contains(s, "echo 'narwhal-engine plan: WARNING") || strings.Contains(s, "VLLM_API_KEY") {
		t.Fatalf("allowed unauthenticated plan (unauthenticated=%v):\n%s", plans[0].Unauthenticated, s)
	}
	// With the variable named, the plan authenticates and the key reaches
	// vLLM only through the environment (never argv, where ps shows it).
	cfg.Engine.EngineAPIKeyEnv = "NARWHAL_ENGINE_KEY"
	plans, err = Plan(cfg, Options{})
	if err != nil || plans[0].Unauthenticated || strings.Contains(plans[0].Script(), "WARNING") || strings.Contains(Join(plans[0].Argv), "api-key") {
		t.Fatalf("authenticated plan: %v %+v", err, plans)
	}
}

// An iid becomes a directory name and a comment in launch.sh: one that
// would leave the launch directory or end the comment is refused.
func TestPlanRefusesAnIIDThatEscapes(t *testing.T) {
	for _, iid := range []string{"../../etc", "a/b", "..", "x\nrm -rf ~", "x\r"} {
		b, _ := json.Marshal(iid)
		doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":` + string(b) + `,"url":"http://10.0.0.5:8000"}],"slo":{"ttft_s":1,"tpot_s":0.05},"engine":{"engine_api_key_env":"K"}}`
		cfg, err := fleet.Parse("fleet.json", []byte(doc), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Plan(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "launch directory") {
			t.Errorf("iid %q: %v, want a refusal", iid, err)
		}
	}
}
