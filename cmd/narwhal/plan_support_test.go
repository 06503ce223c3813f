package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPlanSaysUnsupportedBeforeMemory: an architecture marked unsupported
// on the GPU's architecture is named before any memory figure; the same
// model on another GPU architecture keeps its registry state.
func TestPlanSaysUnsupportedBeforeMemory(t *testing.T) {
	model, st := llamaDir(t), t.TempDir()
	code, _, errb := runCLI(t, "evidence", "--store", st, "support", "LlamaForCausalLM", "--gpu", "t4", "--cpu-arch", "x86_64",
		"--mark", "unsupported", "--reason", "test mark")
	if code != 0 {
		t.Fatalf("mark: %s", errb)
	}
	code, out, errb := runCLI(t, "plan", "--model-dir", model, "--gpu", "t4", "--cpu-arch", "x86_64", "--store", st)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(first, "engine support unsupported: LlamaForCausalLM on sm_75/x86_64") || !strings.Contains(first, "test mark") {
		t.Fatalf("first line %q does not name the unsupported state", first)
	}
	if i, j := strings.Index(out, "unsupported"), strings.Index(out, "GiB"); j < 0 || i > j {
		t.Fatalf("the support state does not come before the memory figures:\n%s", out)
	}
	code, out, _ = runCLI(t, "plan", "--model-dir", model, "--gpu", "h100-sxm", "--cpu-arch", "x86_64", "--store", st, "--format", "json")
	var env struct {
		Data struct {
			Support struct {
				State string `json:"state"`
			} `json:"engine_support"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); code != 0 || err != nil || env.Data.Support.State != "native_vllm" {
		t.Fatalf("h100 plan: code %d err %v state %q", code, err, env.Data.Support.State)
	}
}
