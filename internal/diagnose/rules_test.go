package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Helpers of the rules tests are prefixed rt so they cannot collide with
// the scanner's test helpers in this package.

func rtI(v int64) *int64               { return &v }
func rtF(v float64) *float64           { return &v }
func rtGiB(g float64) *int64           { v := int64(g * (1 << 30)); return &v }
func rtCC(a, b int) *ComputeCapability { return &ComputeCapability{Major: a, Minor: b} }

func rtGPU(t *testing.T, name string) *memory.HardwareSpec {
	t.Helper()
	g, err := memory.LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	h := memory.HardwareFor(g, 0)
	return &h
}

func rtRemedy(t *testing.T, fam Family, f Facts, in Input) Remedy {
	t.Helper()
	r, err := Remediate(Diagnosis{Status: StatusRecognized, Family: fam, Facts: f}, in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rtChanges renders every correction as "path=value,…" in rank order.
func rtChanges(r Remedy) []string {
	var out []string
	for _, c := range r.Corrections {
		var parts []string
		for _, ch := range c.Changes {
			parts = append(parts, ch.Field.Path()+"="+ch.To.String())
		}
		if c.RequiresArtifact {
			parts = append(parts, "artifact")
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

func rtNeeds(r Remedy) []string {
	var out []string
	for _, n := range r.Needs {
		out = append(out, string(n.Kind)+":"+n.What)
	}
	return out
}

// structuralChange reports whether a change needs no figure at all: the
// graph-capture rule turns graphs off or keeps a prefix of the version's
// default capture list (pinned engine facts, not log values).
func structuralChange(t *testing.T, ch plan.Change) bool {
	switch ch.Field {
	case plan.FieldEnforceEager:
		return ch.To.Kind == plan.KindBool && ch.To.Bool
	case plan.FieldCUDAGraphCaptureSizes:
		ef, _, err := memory.LoadFacts(memory.DefaultVLLMVersion)
		if err != nil {
			t.Fatal(err)
		}
		return len(ch.To.Ints) > 0 && slices.Equal(ch.To.Ints, ef.Defaults.CaptureSizes[:len(ch.To.Ints)])
	}
	return false
}

// TestRulesNeverInventValues walks every rule with empty facts and no
// inputs: no rule may return a figure it did not compute from typed
// facts. Each answers what it needs; the only corrections left are the
// ones that need no figure.
func TestRulesNeverInventValues(t *testing.T) {
	for _, rule := range Rules() {
		t.Run(string(rule.Family), func(t *testing.T) {
			r := rtRemedy(t, rule.Family, Facts{}, Input{})
			if r.Rule.Status != RuleHypothesis {
				t.Errorf("rule %s starts as %s, want hypothesis", rule.ID, r.Rule.Status)
			}
			if len(r.Needs) == 0 {
				t.Errorf("rule %s with empty facts states no need", rule.ID)
			}
			for _, c := range r.Corrections {
				for _, ch := range c.Changes {
					if !structuralChange(t, ch) {
						t.Errorf("rule %s invented %s from empty facts", rule.ID, ch)
					}
				}
				if c.RequiresArtifact && len(c.Unchecked) == 0 {
					t.Errorf("rule %s proposes another artifact without saying what must be planned", rule.ID)
				}
			}
		})
	}
	if _, ok := RuleFor(FamilyUnrecognized); ok {
		t.Fatal("unrecognized failures must have no rule")
	}
	r := rtRemedy(t, FamilyUnrecognized, Facts{MaxModelLen: rtI(4096)}, Input{})
	if len(r.Corrections) != 0 || len(r.Needs) == 0 {
		t.Fatalf("an unrecognized failure got corrections %v / needs %v", rtChanges(r), r.Needs)
	}
}

// TestEveryFamilyHasOneRule: every family but unrecognized has exactly
// one rule, and rule ids are unique.
func TestEveryFamilyHasOneRule(t *testing.T) {
	seen := map[Family]int{}
	ids := map[RuleID]bool{}
	for _, r := range Rules() {
		seen[r.Family]++
		if ids[r.ID] {
			t.Errorf("rule id %s twice", r.ID)
		}
		ids[r.ID] = true
	}
	for _, f := range Families() {
		if f != FamilyUnrecognized && seen[f] != 1 {
			t.Errorf("family %s has %d rules", f, seen[f])
		}
	}
}

// kvFacts is vLLM V1's "KV cache is needed … larger than the available"
// failure: max_model_len 131072, 16.0 GiB needed, 12.35 GiB available.
func kvFacts() Facts {
	return Facts{MaxModelLen: rtI(131072), KVNeededBytes: rtGiB(16), KVAvailableBytes: rtGiB(12.35),
		DType: new(DType), TotalMemoryBytes: rtGiB(80)}
}

func TestKVTooSmallComputesFromReportedMemory(t *testing.T) {
	f := kvFacts()
	*f.DType = DTypeBFloat16
	r := rtRemedy(t, FamilyOOMKVCache, f, Input{})
	// bytes per token = ceil((16 GiB + 0.005 GiB) / 131072) = 131113;
	// (12.35 GiB − 0.005 GiB) / 131113 = 101096 → 101088 (block 16).
	// utilization: 0.9 + (16 − 12.35 GiB + 0.01 GiB) / 80 GiB = 0.94575… → 0.95.
	want := []string{"gpu_memory_utilization=0.95", "max_model_len=101088", "kv_cache_dtype=fp8"}
	if got := rtChanges(r); !slices.Equal(got, want) {
		t.Fatalf("corrections %v, want %v (notes %v)", got, want, r.Notes)
	}
	if r.Base.MaxModelLen != 131072 || r.Base.DType != plan.DTypeBFloat16 {
		t.Fatalf("base plan from the log's facts: %+v", r.Base)
	}
	for _, c := range r.Corrections {
		if len(c.TradeOffs) == 0 || len(c.Basis) == 0 {
			t.Errorf("%v: a correction without trade-offs or basis", c.Changes)
		}
	}
	// vLLM's own estimate, when lower, caps the computed length.
	f.EstimatedMaxModelLen = rtI(90007)
	r = rtRemedy(t, FamilyOOMKVCache, f, Input{})
	if got := rtChanges(r); got[1] != "max_model_len=90000" {
		t.Fatalf("with vLLM's estimate: %v", got)
	}
}

// The operator's plan asks for 65536 tokens while the log failed at
// 131072: the bytes per token come from the log's own figures, the need
// from the plan — which the reported memory already holds.
func TestKVTooSmallPlanDiffersFromLog(t *testing.T) {
	f := kvFacts()
	base := plan.Plan{MaxModelLen: 65536}
	r := rtRemedy(t, FamilyOOMKVCache, f, Input{Plan: &base})
	if len(r.Corrections) != 0 {
		t.Fatalf("nothing to correct for the plan's 65536: %v", rtChanges(r))
	}
	if n := strings.Join(r.Notes, "|"); !strings.Contains(n, "131072") || !strings.Contains(n, "already covers") {
		t.Fatalf("notes %v", r.Notes)
	}
}

// V0's wording states tokens, not bytes: the KV holds exactly the logged
// token capacity; the utilization needs the bytes per token, so it is a
// need without a model directory.
func TestKVTooSmallV0Tokens(t *testing.T) {
	r := rtRemedy(t, FamilyOOMKVCache, Facts{MaxModelLen: rtI(32768), KVCapacityTokens: rtI(21440)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"max_model_len=21440"}) {
		t.Fatalf("corrections %v", got)
	}
	if !slices.Contains(rtNeeds(r), "log_fact:kv_needed_bytes") {
		t.Fatalf("needs %v", rtNeeds(r))
	}
}

// A correction that lowers max_model_len below the fleet's need violates
// it and ranks after every correction that violates nothing; a contract
// factor change is a violation too.
func TestRankedByFleetRequirements(t *testing.T) {
	f := kvFacts()
	*f.DType = DTypeBFloat16
	cfg := &fleet.Config{Model: "m/x", SLO: fleet.SLO{TTFT: 1, TPOT: 0.05}}
	base := plan.Plan{KVCacheDType: plan.KVCacheAuto}
	r := rtRemedy(t, FamilyOOMKVCache, f, Input{Plan: &base, Requirements: FleetRequirements(cfg, 131072)})
	want := []string{"gpu_memory_utilization=0.95", "kv_cache_dtype=fp8", "max_model_len=101088"}
	if got := rtChanges(r); !slices.Equal(got, want) {
		t.Fatalf("ranked %v, want %v", got, want)
	}
	if v := r.Corrections[2].Violations; len(v) != 1 || v[0].Requirement != ReqMaxModelLen {
		t.Fatalf("shorter context violations %v", v)
	}
	if len(r.Corrections[0].Violations) != 0 || len(r.Corrections[0].Risks) != 0 {
		t.Fatalf("utilization: %+v", r.Corrections[0])
	}
	// fp8 changes kv_cache_dtype, an SLO-relevant field (risk) as well.
	if !slices.Equal(r.Corrections[1].Risks, []Requirement{ReqSLO}) {
		t.Fatalf("fp8 KV risks %v", r.Corrections[1].Risks)
	}
	cfg.EngineContract = &fleet.EngineContract{ModelDtype: "bfloat16", KVCacheDtype: "auto"}
	r = rtRemedy(t, FamilyOOMKVCache, f, Input{Plan: &base, Requirements: FleetRequirements(cfg, 0)})
	for _, c := range r.Corrections {
		if c.Plan.KVCacheDType == plan.KVCacheFP8 && (len(c.Violations) != 1 || c.Violations[0].Requirement != ReqKVCacheDType) {
			t.Fatalf("fp8 KV against an auto contract: %v", c.Violations)
		}
	}
	if got := rtChanges(r); got[len(got)-1] != "kv_cache_dtype=fp8" {
		t.Fatalf("the contract violation ranks last: %v", got)
	}
}

func TestStartupFreeMemory(t *testing.T) {
	f := Facts{FreeMemoryBytes: rtGiB(60), TotalMemoryBytes: rtGiB(80), GPUMemoryUtilization: rtF(0.9)}
	r := rtRemedy(t, FamilyStartupFreeMemory, f, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"gpu_memory_utilization=0.74"}) {
		t.Fatalf("corrections %v", got)
	}
	if len(r.Actions) != 1 || r.Actions[0].Kind != ActionFreeGPU {
		t.Fatalf("actions %v", r.Actions)
	}
	if u := r.Corrections[0].Unchecked; len(u) != 1 || u[0].What != "kv_fit" {
		t.Fatalf("the KV fit at the lower utilization is unchecked without a model: %v", u)
	}
}

func TestGraphCaptureOOM(t *testing.T) {
	f := Facts{TriedToAllocateBytes: rtGiB(2), FreeMemoryBytes: rtGiB(1), TotalMemoryBytes: rtGiB(80)}
	r := rtRemedy(t, FamilyOOMCUDAGraph, f, Input{Requirements: Requirements{SLO: &SLO{TTFTSeconds: 1, TPOTSeconds: 0.05}}})
	// 0.9 − (2 − 1 + 0.01 GiB) / 80 GiB = 0.88737… → 0.88
	got := rtChanges(r)
	if len(got) != 3 || got[0] != "gpu_memory_utilization=0.88" || got[1] != "enforce_eager=true" || !strings.HasPrefix(got[2], "cudagraph_capture_sizes=[1,2,4,8,") {
		t.Fatalf("corrections %v", got)
	}
	if !slices.Equal(r.Corrections[1].Risks, []Requirement{ReqSLO}) {
		t.Fatalf("enforce_eager must put the SLO at risk: %v", r.Corrections[1].Risks)
	}
	sizes := r.Corrections[2].Plan.CUDAGraphCaptureSizes
	if sizes[len(sizes)-1] != 256 {
		t.Fatalf("capture sizes up to half of 512: %v", sizes)
	}
}

func TestBF16AndDTypeRules(t *testing.T) {
	r := rtRemedy(t, FamilyBF16Unsupported, Facts{ComputeCapability: rtCC(7, 5)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"dtype=half"}) {
		t.Fatalf("bf16 on 7.5: %v", got)
	}
	// The GPU from --gpu gives the capability when the log does not.
	r = rtRemedy(t, FamilyBF16Unsupported, Facts{}, Input{GPU: rtGPU(t, "t4")})
	if got := rtChanges(r); !slices.Equal(got, []string{"dtype=half"}) {
		t.Fatalf("bf16 on a T4: %v (needs %v)", got, rtNeeds(r))
	}
	r = rtRemedy(t, FamilyBF16Unsupported, Facts{ComputeCapability: rtCC(9, 0)}, Input{})
	if len(r.Corrections) != 0 || len(r.Notes) == 0 {
		t.Fatalf("bf16 failure on a 9.0 GPU must not be corrected blindly: %v", rtChanges(r))
	}
	r = rtRemedy(t, FamilyDTypeIncompatible, Facts{ComputeCapability: rtCC(8, 6)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"dtype=bfloat16"}) {
		t.Fatalf("float16 refused on 8.6: %v", got)
	}
	cfg := &fleet.Config{Model: "m/x", EngineContract: &fleet.EngineContract{ModelDtype: "bfloat16"}}
	r = rtRemedy(t, FamilyBF16Unsupported, Facts{ComputeCapability: rtCC(7, 0)}, Input{Requirements: FleetRequirements(cfg, 0)})
	if v := r.Corrections[0].Violations; len(v) != 1 || v[0].Requirement != ReqModelDType {
		t.Fatalf("dtype half against a bfloat16 contract: %v", v)
	}
}

func TestTPDivisibility(t *testing.T) {
	r := rtRemedy(t, FamilyTPDivisibility, Facts{NumAttentionHeads: rtI(40), NumKVHeads: rtI(8), TensorParallelSize: rtI(3)}, Input{})
	got := rtChanges(r)
	if !slices.Equal(got, []string{"tensor_parallel_size=2", "tensor_parallel_size=4"}) {
		t.Fatalf("corrections %v", got)
	}
	// 28 heads, 4 KV heads, TP 3: 2 divides both; 4 divides both.
	r = rtRemedy(t, FamilyTPDivisibility, Facts{NumAttentionHeads: rtI(28), NumKVHeads: rtI(4), TensorParallelSize: rtI(3)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"tensor_parallel_size=2", "tensor_parallel_size=4"}) {
		t.Fatalf("28/4 heads: %v", got)
	}
	// 14 attention heads, 2 KV heads, TP 4: below 2, above 7 divides 14 but
	// not KV 2 (7 % 2 ≠ 0), 14 does.
	r = rtRemedy(t, FamilyTPDivisibility, Facts{NumAttentionHeads: rtI(14), NumKVHeads: rtI(2), TensorParallelSize: rtI(4)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"tensor_parallel_size=2", "tensor_parallel_size=14"}) {
		t.Fatalf("14/2 heads: %v", got)
	}
	r = rtRemedy(t, FamilyTPDivisibility, Facts{NumAttentionHeads: rtI(40), TensorParallelSize: rtI(3)}, Input{})
	for _, c := range r.Corrections {
		if !slices.ContainsFunc(c.Unchecked, func(n Need) bool { return n.What == "num_kv_heads" }) {
			t.Fatalf("KV heads unknown must be flagged: %+v", c.Unchecked)
		}
	}
	cfg := &fleet.Config{Model: "m/x", Hardware: &fleet.Hardware{TensorParallel: 3}}
	r = rtRemedy(t, FamilyTPDivisibility, Facts{NumAttentionHeads: rtI(40), NumKVHeads: rtI(8), TensorParallelSize: rtI(3)}, Input{Requirements: FleetRequirements(cfg, 0)})
	if v := r.Corrections[0].Violations; len(v) != 1 || v[0].Requirement != ReqTensorParallel {
		t.Fatalf("a TP change against the fleet's hardware block: %v", v)
	}
}

func TestQuantKernelAndActionsOnly(t *testing.T) {
	q := QuantMethod("awq_marlin")
	r := rtRemedy(t, FamilyQuantCapability, Facts{Quantization: &q, ComputeCapability: rtCC(7, 5), RequiredComputeCapability: rtCC(8, 0)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"quantization=awq"}) {
		t.Fatalf("awq_marlin on 7.5: %v", got)
	}
	r = rtRemedy(t, FamilyQuantCapability, Facts{Quantization: &q, ComputeCapability: rtCC(7, 0), RequiredComputeCapability: rtCC(8, 0)}, Input{})
	if len(r.Corrections) != 0 || len(r.Actions) != 1 || !strings.Contains(r.Actions[0].Text, "8.0") {
		t.Fatalf("awq_marlin on 7.0: %v %v", rtChanges(r), r.Actions)
	}
	r = rtRemedy(t, FamilyPortInUse, Facts{Port: rtI(8000)}, Input{})
	if len(r.Corrections) != 0 || !strings.Contains(r.Actions[0].Text, "port 8000") || r.Needs[0].Kind != NeedOperatorChoice {
		t.Fatalf("port in use: %v %v %v", rtChanges(r), r.Actions, r.Needs)
	}
	r = rtRemedy(t, FamilyGatedRepo, Facts{HTTPStatus: rtI(403)}, Input{})
	if len(r.Corrections) != 0 || r.Needs[0].Kind != NeedCredential {
		t.Fatalf("gated repo: %v %v", rtChanges(r), r.Needs)
	}
}

func TestNIXLHandshakeAlignsWithContract(t *testing.T) {
	r := rtRemedy(t, FamilyNIXLHandshake, Facts{}, Input{})
	if len(r.Corrections) != 0 || rtNeeds(r)[0] != "fleet:engine_contract" {
		t.Fatalf("without a fleet: %v %v", rtChanges(r), r.Needs)
	}
	cfg := &fleet.Config{Model: "m/x", EngineContract: &fleet.EngineContract{VLLMVersion: "0.11.0", NIXLConnectorVersion: 2, ModelDtype: "bfloat16", KVCacheDtype: "auto"}}
	base := plan.Plan{DType: plan.DTypeHalf, KVCacheDType: plan.KVCacheFP8}
	r = rtRemedy(t, FamilyNIXLHandshake, Facts{}, Input{Plan: &base, Requirements: FleetRequirements(cfg, 0)})
	if got := rtChanges(r); !slices.Equal(got, []string{"dtype=bfloat16,kv_cache_dtype=auto"}) {
		t.Fatalf("corrections %v", got)
	}
	if len(r.Corrections[0].Violations) != 0 || !strings.Contains(r.Actions[0].Text, "vllm_version 0.11.0") {
		t.Fatalf("aligned plan: %v %v", r.Corrections[0].Violations, r.Actions)
	}
}

func TestNoKVMemoryWithoutModelNeedsBytesPerToken(t *testing.T) {
	f := Facts{KVAvailableBytes: rtGiB(-0.3), CUDAGraphBytes: rtGiB(1.5), MaxModelLen: rtI(8192), EngineVersion: &EngineVersion{Major: 0, Minor: 21, Patch: 0, Post: -1, Dev: -1}}
	r := rtRemedy(t, FamilyNoKVCacheMemory, f, Input{})
	// vLLM 0.21 subtracts the graph estimate: eager returns 1.5 GiB, the
	// fit of one request is unchecked without the model.
	if got := rtChanges(r); !slices.Equal(got, []string{"enforce_eager=true"}) {
		t.Fatalf("corrections %v (notes %v)", got, r.Notes)
	}
	if n := rtNeeds(r); !slices.Contains(n, "model_dir:kv_bytes_per_token") || !slices.Contains(n, "model_dir:activation_peak") {
		t.Fatalf("needs %v", n)
	}
	f.EngineVersion = &EngineVersion{Major: 0, Minor: 11, Patch: 0, Post: -1, Dev: -1}
	r = rtRemedy(t, FamilyNoKVCacheMemory, f, Input{})
	if len(r.Corrections) != 0 {
		t.Fatalf("vLLM 0.11 does not subtract graphs; eager does not help: %v", rtChanges(r))
	}
}

func TestRemedyDeterministic(t *testing.T) {
	f := kvFacts()
	*f.DType = DTypeBFloat16
	a := fmt.Sprintf("%+v", rtRemedy(t, FamilyOOMKVCache, f, Input{}))
	for range 5 {
		if b := fmt.Sprintf("%+v", rtRemedy(t, FamilyOOMKVCache, f, Input{})); a != b {
			t.Fatal("the same diagnosis gave two remedies")
		}
	}
}

// Only vLLM's own estimate of the longest length the memory holds is
// logged: it is the hold, rounded down to a block.
func TestKVTooSmallEstimateOnly(t *testing.T) {
	r := rtRemedy(t, FamilyOOMKVCache, Facts{MaxModelLen: rtI(32768), EstimatedMaxModelLen: rtI(20001)}, Input{})
	if got := rtChanges(r); !slices.Equal(got, []string{"max_model_len=20000"}) {
		t.Fatalf("corrections %v", got)
	}
}
