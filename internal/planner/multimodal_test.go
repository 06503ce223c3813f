package planner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// A checkpoint the calculator cannot size (a vision wrapper without
// sharding rules, an architecture outside its dispatch table) is a plan
// with status unknown and a reason, and its record is written: the
// launch fields the calculator left unresolved are missing from the
// execution fingerprint, never zero (which execfp refuses: "execfp:
// profiling_shape.max_num_batched_tokens 0", exit 1 on Llama-3.2-Vision,
// Qwen2.5-VL and Gemma-4 before).
func TestUnsizedArchitecturesAreUnknownPlans(t *testing.T) {
	for _, tc := range []struct{ arch, modelType string }{
		{"MllamaForConditionalGeneration", "mllama"},
		{"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"},
		{"Gemma4ForConditionalGeneration", "gemma4"},
		{"NoSuchModelForCausalLM", "nosuch"},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			dir := llama(t, 1)
			rewriteArch(t, dir, tc.arch, tc.modelType)
			res := plan(t, Request{ModelDir: dir, GPU: "NVIDIA H100 80GB HBM3"})
			if res.Prediction.Status != memory.PredictionUnknown || len(res.Prediction.UnknownReasons) == 0 {
				t.Fatalf("status %s, reasons %v: want unknown with a reason", res.Prediction.Status, res.Prediction.UnknownReasons)
			}
			if _, err := res.Record(clock()); err != nil {
				t.Fatalf("the unknown plan has no record: %v", err)
			}
		})
	}
}

func rewriteArch(t *testing.T, dir, arch, modelType string) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["architectures"], cfg["model_type"] = []string{arch}, modelType
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
