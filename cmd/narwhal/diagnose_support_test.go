package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDiagnoseUnsupportedArchitectureRecordsSupport: a log in which vLLM
// refuses the architecture names the support state first and records it
// on the exact (GPU arch, CPU arch) pair, with the failure as evidence.
func TestDiagnoseUnsupportedArchitectureRecordsSupport(t *testing.T) {
	st := t.TempDir()
	log := "../../internal/diagnose/testdata/corpus/arch_v1.log"
	code, out, errb := runCLI(t, "diagnose", log, "--gpu", "h100-sxm", "--cpu-arch", "x86_64", "--store", st)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(first, "narwhal diagnose: engine support unsupported: DeepseekOCRForCausalLM on sm_90/x86_64") || !strings.Contains(first, "refused the architecture") {
		t.Fatalf("first line %q", first)
	}
	code, out, _ = runCLI(t, "evidence", "--store", st, "support", "DeepseekOCRForCausalLM", "--gpu-arch", "sm_90", "--cpu-arch", "x86_64")
	if code != 0 || !strings.HasPrefix(out, "unsupported:") {
		t.Fatalf("support after diagnose: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "evidence", "--store", st, "support", "DeepseekOCRForCausalLM", "--gpu-arch", "sm_80", "--cpu-arch", "x86_64")
	if code != 0 || !strings.HasPrefix(out, "transformers_backend:") {
		t.Fatalf("another GPU arch took the state: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "diagnose", log, "--gpu", "h100-sxm", "--cpu-arch", "x86_64", "--store", t.TempDir(), "--format", "json")
	var env struct {
		Data struct {
			Support *struct {
				State string `json:"state"`
			} `json:"engine_support"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); code != 0 || err != nil || env.Data.Support == nil || env.Data.Support.State != "unsupported" {
		t.Fatalf("json: code %d err %v %+v", code, err, env.Data.Support)
	}
}
