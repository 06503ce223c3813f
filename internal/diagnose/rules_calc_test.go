package diagnose

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// rtModel writes a header-only checkpoint and reads it into the
// calculator's input the way the CLI does (planner.CalculatorInput).
func rtModel(t *testing.T, m fixture.Model, gpu string) *memory.PlanInput {
	t.Helper()
	dir := t.TempDir()
	if _, err := fixture.Write(dir, fixture.Build(m, 1)); err != nil {
		t.Fatal(err)
	}
	in, err := planner.CalculatorInput(planner.Request{ModelDir: dir, GPU: gpu}, ports.NewFake(time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return &in
}

// Llama-3.1-70B in BF16 does not load on one A100-80GB; the rule walks
// tensor-parallel sizes that divide 64 heads and 8 KV heads and takes the
// first the calculator predicts to fit.
func TestWeightsOOMLargerTPByCalculator(t *testing.T) {
	model := rtModel(t, fixture.Llama31_70B(), "a100-80gb")
	base := plan.Plan{MaxModelLen: 8192, TensorParallelSize: 1}
	cc := ComputeCapability{8, 0}
	r := rtRemedy(t, FamilyOOMWeightLoad, Facts{ComputeCapability: &cc}, Input{Plan: &base, Model: model})
	got := rtChanges(r)
	if len(got) != 3 || got[0] != "tensor_parallel_size=2" && got[0] != "tensor_parallel_size=4" {
		t.Fatalf("corrections %v (notes %v)", got, r.Notes)
	}
	tp := r.Corrections[0].Plan.TensorParallelSize
	pr, err := (&calculator{in: *model}).predict(r.Corrections[0].Plan)
	if err != nil || !pr.Fits {
		t.Fatalf("the proposed TP %d does not fit by the calculator: %v", tp, err)
	}
	if tp > 2 {
		p := base
		p.TensorParallelSize = 2
		if pr, _ := (&calculator{in: *model}).predict(p); pr.Fits {
			t.Fatal("TP 2 fits but a larger TP was proposed")
		}
	}
	if got[1] != "quantization=fp8" || got[2] != "artifact" {
		t.Fatalf("alternatives %v", got)
	}
	if r.Corrections[2].Violations == nil || !r.Corrections[2].RequiresArtifact {
		t.Fatalf("artifact alternative: %+v", r.Corrections[2])
	}
}

// With the model directory, bytes per token come from the calculator
// (Llama-3.1-8B: 32 layers × 8 KV heads × 128 × 2 × 2 B = 131072 B), so
// the V1 failure without a "needed" figure still gives both corrections.
func TestKVTooSmallWithCalculator(t *testing.T) {
	model := rtModel(t, fixture.Llama31_8B(), "l4")
	f := Facts{MaxModelLen: rtI(32768), KVAvailableBytes: rtGiB(3.2)}
	r := rtRemedy(t, FamilyOOMKVCache, f, Input{Model: model})
	// (3.2 GiB − 0.005 GiB) / 131072 = 26173.4 → 26160; 32768 tokens need
	// 4 GiB: 0.8 GiB + rounding more over the L4's memory; fp8 halves 4 GiB.
	total := float64(model.Hardware.TotalMemoryBytes)
	u := ceilRatio(0.9 + (0.8*float64(1<<30)+float64(gibRounding))/total)
	want := []string{"gpu_memory_utilization=" + fmtRatio(u), "max_model_len=26160", "kv_cache_dtype=fp8"}
	if got := rtChanges(r); !slices.Equal(got, want) {
		t.Fatalf("corrections %v, want %v (needs %v notes %v)", got, want, r.Needs, r.Notes)
	}
	if !strings.Contains(r.Corrections[1].Basis[0], "131072 B per token (calculator)") {
		t.Fatalf("basis %v", r.Corrections[1].Basis)
	}
	// 131072 tokens need 16 GiB: no utilization of a 24 GB card holds it.
	f.MaxModelLen = rtI(131072)
	r = rtRemedy(t, FamilyOOMKVCache, f, Input{Model: model})
	if got := rtChanges(r); !slices.Equal(got, []string{"max_model_len=26160"}) || len(r.Notes) == 0 {
		t.Fatalf("131072 on an L4: %v %v", got, r.Notes)
	}
}

// No memory for cache blocks with the model directory: the utilization is
// computed for one max_model_len request, and smaller batches are tried
// by the calculator's predicted activation saving.
func TestNoKVMemoryWithCalculator(t *testing.T) {
	model := rtModel(t, fixture.Llama31_8B(), "l4")
	f := Facts{KVAvailableBytes: rtGiB(-0.3), MaxModelLen: rtI(8192)}
	r := rtRemedy(t, FamilyNoKVCacheMemory, f, Input{Model: model})
	got := rtChanges(r)
	if len(got) == 0 || !strings.HasPrefix(got[0], "gpu_memory_utilization=") {
		t.Fatalf("corrections %v (needs %v, notes %v)", got, r.Needs, r.Notes)
	}
	// 8192 tokens × 131072 B = 1 GiB; deficit 1.3 GiB + rounding over the
	// L4's total memory.
	u := r.Corrections[0].Plan.GPUMemoryUtilization
	total := float64(model.Hardware.TotalMemoryBytes)
	need := 0.9 + (float64(1<<30)+0.3*float64(1<<30)+float64(gibRounding))/total
	if u < need || u > need+0.01 {
		t.Fatalf("utilization %v, want ceil_0.01(%v)", u, need)
	}
	for _, c := range r.Corrections[1:] {
		if len(c.Changes) != 1 || (c.Changes[0].Field != plan.FieldMaxNumBatchedTokens && c.Changes[0].Field != plan.FieldMaxNumSeqs) {
			t.Fatalf("unexpected alternative %v", c.Changes)
		}
	}
}
