package execfp

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func sp(s string) *string               { return &s }
func ip(i int) *int                     { return &i }
func i64p(i int64) *int64               { return &i }
func fp(f float64) *float64             { return &f }
func bp(b bool) *bool                   { return &b }
func mp(m GraphMode) *GraphMode         { return &m }
func sizes(s ...int) *[]int             { return &s }
func dg(c byte) *string                 { return sp("1220" + strings.Repeat(string(c)+"0", 32)) }
func envp(e Env) *Env                   { return &e }
func cfgp(c EngineConfig) *EngineConfig { return &c }

// full is a complete input: every listed part known.
func full() Input {
	return Input{
		Artifact: dg('a'), Quantization: dg('b'), RuntimeTransform: dg('c'),
		EngineConfig: cfgp(EngineConfig{
			DType: sp("bfloat16"), Quantization: sp("none"), KVCacheDType: sp("auto"), BlockSize: ip(16),
			MaxModelLen: i64p(32768), MaxNumSeqs: i64p(256), MaxNumBatchedTokens: i64p(8192),
			GPUMemoryUtilization: fp(0.9), KVCacheMemoryBytes: i64p(0), EnforceEager: bp(false),
			EnablePrefixCaching: bp(true), EnableChunkedPrefill: bp(true), TensorParallelSize: ip(2),
			PipelineParallelSize: ip(1), DataParallelSize: ip(1), EnableExpertParallel: bp(false),
			CPUOffloadGB: fp(0), EnableLoRA: bp(false), MaxLoRARank: ip(16), Other: map[string]string{"seed": "0"},
		}),
		EngineVersion:   sp("0.21.0"),
		ContainerDigest: sp("sha256:" + strings.Repeat("d", 64)),
		GPU:             GPU{SKU: sp("NVIDIA H100 80GB HBM3"), TotalMemoryBytes: i64p(85020000256), ComputeCapability: sp("9.0"), Count: ip(2)},
		Backends:        Backends{Attention: sp("FLASH_ATTN"), Linear: sp("unquantized"), MoE: sp("none")},
		Stack:           Stack{TorchVersion: sp("2.9.0+cu128"), RuntimeVersion: sp("12.8"), DriverVersion: sp("570.124.06")},
		Graph:           Graph{Mode: mp(GraphFullAndPiecewise), CaptureSizes: sizes(1, 2, 4, 8, 16)},
		AllocatorEnv:    envp(Env{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}),
		Topology:        Topology{TP: ip(2), PP: ip(1), DP: ip(1), EP: ip(1), WorldSize: ip(2), Rank: ip(0)},
		Shape:           WorkloadShape{MaxNumBatchedTokens: i64p(8192), MaxNumSeqs: i64p(256), MaxModelLen: i64p(32768)},
		ReuseKeys:       map[string]string{"vllm_compile_hash": "abc"},
	}
}

func mustFP(t *testing.T, in Input) (string, Input) {
	t.Helper()
	d, n, err := Fingerprint(in)
	if err != nil {
		t.Fatal(err)
	}
	return d, n
}

// mutators change one listed part each; the names are the identity paths
// they touch.
var mutators = map[string]func(*Input){
	"artifact_identity":                      func(in *Input) { in.Artifact = dg('e') },
	"quantization_identity":                  func(in *Input) { in.Quantization = dg('e') },
	"runtime_transform":                      func(in *Input) { in.RuntimeTransform = dg('e') },
	"engine_version":                         func(in *Input) { in.EngineVersion = sp("0.21.1") },
	"container_digest":                       func(in *Input) { in.ContainerDigest = sp("sha256:" + strings.Repeat("e", 64)) },
	"gpu.sku":                                func(in *Input) { in.GPU.SKU = sp("NVIDIA H100 PCIe") },
	"gpu.total_memory_bytes":                 func(in *Input) { in.GPU.TotalMemoryBytes = i64p(85020000257) },
	"gpu.compute_capability":                 func(in *Input) { in.GPU.ComputeCapability = sp("9.1") },
	"gpu.count":                              func(in *Input) { in.GPU.Count = ip(4) },
	"backends.attention":                     func(in *Input) { in.Backends.Attention = sp("FLASHINFER") },
	"backends.linear":                        func(in *Input) { in.Backends.Linear = sp("CutlassFP8ScaledMMLinearKernel") },
	"backends.moe":                           func(in *Input) { in.Backends.MoE = sp("triton") },
	"stack.torch_version":                    func(in *Input) { in.Stack.TorchVersion = sp("2.9.1+cu128") },
	"stack.runtime_version":                  func(in *Input) { in.Stack.RuntimeVersion = sp("12.9") },
	"stack.driver_version":                   func(in *Input) { in.Stack.DriverVersion = sp("575.51.03") },
	"graph.mode":                             func(in *Input) { in.Graph.Mode = mp(GraphPiecewise) },
	"graph.capture_sizes":                    func(in *Input) { in.Graph.CaptureSizes = sizes(1, 2, 4, 8) },
	"allocator_env":                          func(in *Input) { (*in.AllocatorEnv)["NCCL_CUMEM_ENABLE"] = "0" },
	"topology.tp":                            func(in *Input) { in.Topology.TP = ip(1) },
	"topology.pp":                            func(in *Input) { in.Topology.PP = ip(2) },
	"topology.dp":                            func(in *Input) { in.Topology.DP = ip(2) },
	"topology.ep":                            func(in *Input) { in.Topology.EP = ip(2) },
	"topology.world_size":                    func(in *Input) { in.Topology.WorldSize = ip(4) },
	"topology.rank":                          func(in *Input) { in.Topology.Rank = ip(1) },
	"profiling_shape.max_num_batched_tokens": func(in *Input) { in.Shape.MaxNumBatchedTokens = i64p(4096) },
	"profiling_shape.max_num_seqs":           func(in *Input) { in.Shape.MaxNumSeqs = i64p(128) },
	"profiling_shape.max_model_len":          func(in *Input) { in.Shape.MaxModelLen = i64p(16384) },
	"engine_config.dtype":                    func(in *Input) { in.EngineConfig.DType = sp("float16") },
	"engine_config.quantization":             func(in *Input) { in.EngineConfig.Quantization = sp("fp8") },
	"engine_config.kv_cache_dtype":           func(in *Input) { in.EngineConfig.KVCacheDType = sp("fp8") },
	"engine_config.block_size":               func(in *Input) { in.EngineConfig.BlockSize = ip(32) },
	"engine_config.max_model_len":            func(in *Input) { in.EngineConfig.MaxModelLen = i64p(16384) },
	"engine_config.max_num_seqs":             func(in *Input) { in.EngineConfig.MaxNumSeqs = i64p(128) },
	"engine_config.max_num_batched_tokens":   func(in *Input) { in.EngineConfig.MaxNumBatchedTokens = i64p(4096) },
	"engine_config.gpu_memory_utilization":   func(in *Input) { in.EngineConfig.GPUMemoryUtilization = fp(0.85) },
	"engine_config.kv_cache_memory_bytes":    func(in *Input) { in.EngineConfig.KVCacheMemoryBytes = i64p(1 << 34) },
	"engine_config.enforce_eager":            func(in *Input) { in.EngineConfig.EnforceEager = bp(true) },
	"engine_config.enable_prefix_caching":    func(in *Input) { in.EngineConfig.EnablePrefixCaching = bp(false) },
	"engine_config.enable_chunked_prefill":   func(in *Input) { in.EngineConfig.EnableChunkedPrefill = bp(false) },
	"engine_config.tensor_parallel_size":     func(in *Input) { in.EngineConfig.TensorParallelSize = ip(4) },
	"engine_config.pipeline_parallel_size":   func(in *Input) { in.EngineConfig.PipelineParallelSize = ip(2) },
	"engine_config.data_parallel_size":       func(in *Input) { in.EngineConfig.DataParallelSize = ip(2) },
	"engine_config.enable_expert_parallel":   func(in *Input) { in.EngineConfig.EnableExpertParallel = bp(true) },
	"engine_config.cpu_offload_gb":           func(in *Input) { in.EngineConfig.CPUOffloadGB = fp(4) },
	"engine_config.enable_lora":              func(in *Input) { in.EngineConfig.EnableLoRA = bp(true) },
	"engine_config.max_lora_rank":            func(in *Input) { in.EngineConfig.MaxLoRARank = ip(64) },
	"engine_config.other_flags":              func(in *Input) { in.EngineConfig.Other["seed"] = "1" },
}

// clone copies the pointer-held parts that mutators write through.
func clone(in Input) Input {
	c := *in.EngineConfig
	c.Other = map[string]string{}
	for k, v := range in.EngineConfig.Other {
		c.Other[k] = v
	}
	in.EngineConfig = &c
	e := Env{}
	for k, v := range *in.AllocatorEnv {
		e[k] = v
	}
	in.AllocatorEnv = &e
	return in
}

func TestFingerprintCoversAllListedFields(t *testing.T) {
	base, n := mustFP(t, full())
	if !Complete(n) {
		t.Fatalf("full input missing %v", n.MissingFields)
	}
	// Every identity leaf of the record has a mutator, so a part added
	// later without a test fails here.
	var leaves []string
	for k := range flatten(n) {
		if k != "schema" && k != "missing_fields" {
			leaves = append(leaves, k)
		}
	}
	sort.Strings(leaves)
	for _, k := range leaves {
		if mutators[k] == nil {
			t.Errorf("identity part %s has no mutator in this test", k)
		}
	}
	for name, mut := range mutators {
		in := clone(full())
		mut(&in)
		d, m := mustFP(t, in)
		if d == base {
			t.Errorf("changing %s keeps the fingerprint", name)
		}
		if diff := differences(n, m); len(diff) != 1 || diff[0] != name {
			t.Errorf("changing %s: differences %v", name, diff)
		}
	}
}

func TestReuseKeysAndSchemaVersionAreDisplay(t *testing.T) {
	a, _ := mustFP(t, full())
	in := full()
	in.ReuseKeys = map[string]string{"vllm_compile_hash": "other"}
	in.SchemaVersion = 7
	if b, _ := mustFP(t, in); a != b {
		t.Error("display parts changed the fingerprint")
	}
}

func TestPerLaunchValuesExcluded(t *testing.T) {
	launch := func(args ...string) string {
		c, err := ParseServeArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		in := full()
		c = ApplyDefaults(c, *full().EngineConfig)
		in.EngineConfig = &c
		d, _ := mustFP(t, in)
		return d
	}
	a := launch("/models/llama", "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "a", "--api-key", "s3cret", "--disable-log-requests", "--max-model-len", "32768")
	b := launch("/srv/other/path", "--host=127.0.0.1", "--port=9000", "--served-model-name", "b", "--uvicorn-log-level", "debug", "--kv-events-config", "{}", "--max-model-len", "32768")
	if a != b {
		t.Error("per-launch values changed the fingerprint")
	}
	if c := launch("--port", "8000", "--max-model-len", "16384"); c == a {
		t.Error("a memory-relevant flag did not change the fingerprint")
	}
}

func TestIncompleteNeverExactMatch(t *testing.T) {
	in := full()
	in.Stack.DriverVersion = nil
	if r := Classify(in, in); r != PredictionOnly {
		t.Fatalf("equal incomplete inputs: %s", r)
	}
	fpr, n := mustFP(t, in)
	if !contains(n.MissingFields, "stack.driver_version") {
		t.Fatalf("missing %v", n.MissingFields)
	}
	res, err := Match(prior(t, in, fpr), in, Policy{SafetyMargin: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reuse != PredictionOnly || res.EpistemicStatus != evidence.Predicted || !contains(res.Incomplete, "current:stack.driver_version") || !contains(res.Incomplete, "prior:stack.driver_version") {
		t.Errorf("%+v", res)
	}
}

func TestCrossGPUIsPrediction(t *testing.T) {
	cur := clone(full())
	cur.GPU.SKU, cur.GPU.TotalMemoryBytes = sp("NVIDIA A100-SXM4-80GB"), i64p(85100000000)
	cur.GPU.ComputeCapability = sp("8.0")
	wantPrediction(t, full(), cur, "gpu.compute_capability", "gpu.sku", "gpu.total_memory_bytes")
}

func TestCrossBackendIsPrediction(t *testing.T) {
	cur := clone(full())
	cur.Backends.Attention = sp("FLASHINFER")
	wantPrediction(t, full(), cur, "backends.attention")
}

// TestSameClassIsPrediction: an H100 PCIe is the same class as an H100
// SXM (same architecture, compute capability and memory) — still another
// execution.
func TestSameClassIsPrediction(t *testing.T) {
	cur := clone(full())
	cur.GPU.SKU = sp("NVIDIA H100 PCIe")
	wantPrediction(t, full(), cur, "gpu.sku")
}

func TestRankSpecific(t *testing.T) {
	cur := clone(full())
	cur.Topology.Rank = ip(1)
	wantPrediction(t, full(), cur, "topology.rank")
}

func wantPrediction(t *testing.T, p, c Input, diffs ...string) {
	t.Helper()
	if r := Classify(p, c); r != PredictionOnly {
		t.Fatalf("Classify: %s", r)
	}
	pf, _ := mustFP(t, p)
	res, err := Match(prior(t, p, pf), c, Policy{SafetyMargin: 0.15})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reuse != PredictionOnly || res.Label != LabelPrediction || res.EpistemicStatus != evidence.Predicted {
		t.Errorf("%+v", res)
	}
	if strings.Join(res.Differences, ",") != strings.Join(diffs, ",") {
		t.Errorf("differences %v, want %v", res.Differences, diffs)
	}
	if len(res.SourceLineage) != 1 || res.SourceLineage[0] != res.PriorRecord || res.SafetyMargin == nil || *res.SafetyMargin != 0.15 {
		t.Errorf("a prediction cites its source and carries the margin: %+v", res)
	}
	if _, err := Match(prior(t, p, pf), c, Policy{}); err == nil || !strings.Contains(err.Error(), "SafetyMargin") {
		t.Errorf("no margin: %v", err)
	}
}

var measuredAt = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

// prior is a boot measurement of the execution in, at vLLM 0.21.0.
func prior(t *testing.T, in Input, fpr string) Prior {
	t.Helper()
	verdict := evidence.VerdictFits
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeMemory, EpistemicStatus: evidence.Measured,
		Level:      evidence.MaintainerLabMeasured,
		Subject:    map[string]string{SubjectExecution: fpr, evidence.SubjectHardwareClass: "h100"},
		Claim:      evidence.Claim{Quantity: "available_kv_cache_bytes", Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", ProducerVersion: "0", Inputs: []string{}},
		Display:    map[string]any{},
	}, ports.NewFake(measuredAt))
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return Prior{Record: r, Input: in}
}

// TestPriorMeasurementNotNewExecution: an exact match is shown as the
// prior's evidence, with its own observed_at and its freshness.
func TestPriorMeasurementNotNewExecution(t *testing.T) {
	pf, _ := mustFP(t, full())
	later := measuredAt.Add(40 * 24 * time.Hour)
	releases := func(vs ...string) []evidence.Version {
		out := []evidence.Version{}
		for _, s := range vs {
			v, _ := evidence.ParseVersion(s)
			out = append(out, v)
		}
		return out
	}
	res, err := Match(prior(t, full(), pf), full(), Policy{Freshness: evidence.FreshnessInput{Now: later, Releases: releases("0.21.0", "0.21.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reuse != ExactPriorMeasurement || res.Label != LabelMatchingPrior || res.EpistemicStatus != evidence.Measured {
		t.Fatalf("%+v", res)
	}
	if res.ObservedAt != measuredAt.Format(time.RFC3339Nano) {
		t.Errorf("observed_at %q: the prior's own time, never now", res.ObservedAt)
	}
	if strings.Contains(strings.ToLower(res.Label), "measured now") || res.SafetyMargin != nil || len(res.SourceLineage) != 0 {
		t.Errorf("%+v", res)
	}
	if res.Freshness != evidence.Fresh {
		t.Errorf("freshness %s (%s), want fresh: a patch release does not expire boot evidence", res.Freshness, res.FreshnessReason)
	}
	res, _ = Match(prior(t, full(), pf), full(), Policy{Freshness: evidence.FreshnessInput{Now: later, Releases: releases("0.22.0")}})
	if res.Reuse != ExactPriorMeasurement || res.Freshness != evidence.Stale {
		t.Errorf("after 0.22.0: %s %s, want the exact match shown stale", res.Reuse, res.Freshness)
	}
}

func TestMatchRefusesWrongPrior(t *testing.T) {
	pf, _ := mustFP(t, full())
	p := prior(t, full(), pf)
	p.Record.Subject[SubjectExecution] = *dg('f')
	if _, err := Match(p, full(), Policy{SafetyMargin: 0.1}); err == nil || !strings.Contains(err.Error(), "names execution") {
		t.Errorf("wrong execution: %v", err)
	}
	p = prior(t, full(), pf)
	p.Record.Kind, p.Record.EpistemicStatus, p.Record.Level = evidence.KindPrediction, evidence.Predicted, evidence.CalculatedOnly
	if _, err := Match(p, full(), Policy{SafetyMargin: 0.1}); err == nil || !strings.Contains(err.Error(), "not a measurement") {
		t.Errorf("a prediction as prior: %v", err)
	}
}

func TestMissingRecordedNotGuessed(t *testing.T) {
	_, n := mustFP(t, Input{})
	for _, want := range []string{"artifact_identity", "engine_config", "gpu.sku", "gpu.compute_capability", "graph.mode", "graph.capture_sizes", "allocator_env", "topology.rank", "profiling_shape.max_model_len", "container_digest"} {
		if !contains(n.MissingFields, want) {
			t.Errorf("missing_fields lacks %s: %v", want, n.MissingFields)
		}
	}
	if n.GPU.Count != nil || n.Topology.TP != nil || n.EngineConfig != nil {
		t.Error("Normalize filled a value")
	}
	in := full()
	in.EngineConfig.MaxNumSeqs = nil
	_, n = mustFP(t, in)
	if strings.Join(n.MissingFields, ",") != "engine_config.max_num_seqs" {
		t.Errorf("missing %v", n.MissingFields)
	}
	// Native execution is known, not missing.
	in = full()
	in.ContainerDigest = sp(NativeExecution)
	if _, n = mustFP(t, in); !Complete(n) {
		t.Errorf("native execution counted missing: %v", n.MissingFields)
	}
}

func TestGraphNormalization(t *testing.T) {
	in := full()
	in.Graph = Graph{Mode: mp("PIECEWISE"), CaptureSizes: sizes(8, 1, 4, 4, 2)}
	_, n := mustFP(t, in)
	if *n.Graph.Mode != GraphPiecewise || fmt.Sprint(*n.Graph.CaptureSizes) != "[1 2 4 8]" {
		t.Errorf("graph %v %v", *n.Graph.Mode, *n.Graph.CaptureSizes)
	}
	in.Graph = Graph{Mode: mp("eager")}
	_, n = mustFP(t, in)
	if *n.Graph.Mode != GraphNone || n.Graph.CaptureSizes == nil || len(*n.Graph.CaptureSizes) != 0 || contains(n.MissingFields, "graph.capture_sizes") {
		t.Errorf("eager: %v %v missing %v", *n.Graph.Mode, n.Graph.CaptureSizes, n.MissingFields)
	}
	in.Graph = Graph{Mode: mp("sometimes")}
	if _, _, err := Fingerprint(in); err == nil {
		t.Error("unknown graph mode accepted")
	}
}

func TestNormalizeEnv(t *testing.T) {
	got := NormalizeEnv(Env{
		"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0",
		"NCCL_CUMEM_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "4,5,6,7", "HF_TOKEN": "hf_abc", "VLLM_API_KEY": "k",
		"PATH": "/usr/bin", "HOME": "/root", "VLLM_ÜBER": "x",
	})
	want := Env{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0", "NCCL_CUMEM_ENABLE": "0", CUDAVisibleDevicesCount: "4"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	a, b := full(), clone(full())
	(*a.AllocatorEnv)["CUDA_VISIBLE_DEVICES"] = "0,1"
	(*b.AllocatorEnv)["CUDA_VISIBLE_DEVICES"] = "2,3"
	(*b.AllocatorEnv)["HF_TOKEN"] = "hf_secret"
	fa, _ := mustFP(t, a)
	fb, nb := mustFP(t, b)
	if fa != fb {
		t.Error("device ids or a dropped variable changed the fingerprint")
	}
	raw, _, _ := Encode(nb)
	if bytes.Contains(raw, []byte("hf_secret")) {
		t.Error("a credential reached the record")
	}
}

func TestParseServeArgs(t *testing.T) {
	c, err := ParseServeArgs([]string{
		"meta-llama/Llama-3.1-8B-Instruct", "-tp", "4", "--pipeline_parallel_size=2", "--max-model-len", "32k",
		"--max-num-batched-tokens=16K", "--gpu-memory-utilization", "0.92", "--enforce-eager", "--no-enable-prefix-caching",
		"--dtype", "half", "--kv-cache-dtype", "FP8", "--api-key", "s3cret", "--hf-token=hf_x", "--seed", "7",
		"--trust-remote-code", "--port", "8000", "--enable-chunked-prefill=false",
	})
	if err != nil {
		t.Fatal(err)
	}
	in := full()
	in.EngineConfig = &c
	_, n := mustFP(t, in)
	e := n.EngineConfig
	checks := []struct {
		name string
		ok   bool
	}{
		{"tp 4", *e.TensorParallelSize == 4}, {"pp 2", *e.PipelineParallelSize == 2},
		{"32k = 32000", *e.MaxModelLen == 32000}, {"16K = 16384", *e.MaxNumBatchedTokens == 16384},
		{"util", *e.GPUMemoryUtilization == 0.92}, {"eager", *e.EnforceEager}, {"no prefix caching", !*e.EnablePrefixCaching},
		{"half = float16", *e.DType == "float16"}, {"fp8 lower-case", *e.KVCacheDType == "fp8"},
		{"chunked prefill false", !*e.EnableChunkedPrefill},
		{"unmodelled kept", e.Other["seed"] == "7" && e.Other["trust-remote-code"] == "true"},
		{"credentials and per-launch dropped", len(e.Other) == 2},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
	raw, _, err := Encode(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"s3cret", "hf_x", "Llama", "8000"} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("record carries %q", leak)
		}
	}
	if _, err := ParseServeArgs([]string{"--max-model-len"}); err == nil || !strings.Contains(err.Error(), "--max-model-len") {
		t.Errorf("missing value: %v", err)
	}
	if _, err := ParseServeArgs([]string{"--block-size", "sixteen"}); err == nil || !strings.Contains(err.Error(), "block-size") {
		t.Errorf("bad value: %v", err)
	}
	if v, _ := parseSize("25.6k"); v != 25600 {
		t.Errorf("25.6k = %d", v)
	}
	if _, err := parseSize("1.5K"); err == nil {
		t.Error("a fraction with a binary suffix accepted")
	}
}

func TestApplyDefaults(t *testing.T) {
	c, _ := ParseServeArgs([]string{"--max-model-len", "8192"})
	d := EngineConfig{MaxModelLen: i64p(131072), MaxNumSeqs: i64p(256), Other: map[string]string{}}
	got := ApplyDefaults(c, d)
	if *got.MaxModelLen != 8192 || *got.MaxNumSeqs != 256 || got.BlockSize != nil {
		t.Errorf("%+v", got)
	}
	in := full()
	in.EngineConfig = &got
	_, n := mustFP(t, in)
	if !contains(n.MissingFields, "engine_config.block_size") || contains(n.MissingFields, "engine_config.max_num_seqs") {
		t.Errorf("missing %v", n.MissingFields)
	}
}

func TestNormalizeRejects(t *testing.T) {
	for name, mut := range map[string]func(*Input){
		"repository name as artifact": func(in *Input) { in.Artifact = sp("meta-llama/Llama-3.1-8B") },
		"image tag":                   func(in *Input) { in.ContainerDigest = sp("vllm/vllm-openai:latest") },
		"compute capability":          func(in *Input) { in.GPU.ComputeCapability = sp("sm90") },
		"engine version":              func(in *Input) { in.EngineVersion = sp("latest") },
		"rank beyond world":           func(in *Input) { in.Topology.Rank = ip(2) },
		"zero tp":                     func(in *Input) { in.Topology.TP = ip(0) },
		"utilization":                 func(in *Input) { in.EngineConfig.GPUMemoryUtilization = fp(1.5) },
		"backend text":                func(in *Input) { in.Backends.Attention = sp("FLASH; rm -rf /") },
	} {
		in := clone(full())
		mut(&in)
		if _, _, err := Fingerprint(in); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFingerprintDeterministic(t *testing.T) {
	var first []byte
	var firstFP string
	for i := 0; i < 20; i++ {
		in := clone(full())
		d, n := mustFP(t, in)
		b, err := canon.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first, firstFP = b, d
			continue
		}
		if !bytes.Equal(b, first) || d != firstFP {
			t.Fatal("output differs between runs")
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
