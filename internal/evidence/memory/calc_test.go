package memory

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
)

func withConfig(s fixture.Spec, edit func(m map[string]any)) fixture.Spec {
	s.Config = maps.Clone(s.Config)
	edit(s.Config)
	return s
}

// TestUnknownMechanism: a hybrid Mamba config answers unknown with a
// reason, and no component carries a made-up figure.
func TestUnknownMechanism(t *testing.T) {
	spec := withConfig(fixture.Build(fixture.Llama31_8B(), 1), func(m map[string]any) {
		m["architectures"] = []string{"JambaForCausalLM"}
		m["model_type"] = "jamba"
	})
	p := planOf(t, spec, "H100", LaunchConfig{})
	if p.Status != PredictionUnknown || p.Mechanism != MechHybridMamba {
		t.Fatalf("status %s mechanism %s", p.Status, p.Mechanism)
	}
	if !strings.Contains(strings.Join(p.UnknownReasons, "|"), "hybrid_mamba") {
		t.Fatalf("reasons %v do not name the mechanism", p.UnknownReasons)
	}
	assertNoFigures(t, p)
}

// TestNoCalibrationUnknownActivation: without calibration entries for the
// mechanism the activation peak is unknown, and so is the prediction —
// no fixed percentage stands in.
func TestNoCalibrationUnknownActivation(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	in := PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.11.0"),
		Calibration: CalibrationSet{Schema: CalibrationSchema, SchemaVersion: CalibrationSchemaVersion}}
	p, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.ActivationPeak.Status != StatusUnknown || p.ActivationPeak.Bytes != 0 || p.Status != PredictionUnknown {
		t.Fatalf("activation %+v status %s", p.ActivationPeak, p.Status)
	}
	if p.AvailableKVBytes.Known() || p.NumBlocks != 0 || p.Fits {
		t.Fatalf("available KV %+v blocks %d fits %v without calibration", p.AvailableKVBytes, p.NumBlocks, p.Fits)
	}
	// The weights and the KV per token are derived from the headers and
	// stay known.
	if p.WeightBytesPerRank.Status != StatusDerived || p.KVBytesPerToken != 131072 {
		t.Fatalf("derived parts lost: %+v %d", p.WeightBytesPerRank, p.KVBytesPerToken)
	}
}

// TestPredictionDeterministic: the same inputs give byte-identical
// canonical records, whatever order the tensors arrive in.
func TestPredictionDeterministic(t *testing.T) {
	spec := fixture.Build(fixture.Qwen3_30B_A3B(), 1)
	h, cfg := headersOf(t, spec)
	in := PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.11.0"), Launch: LaunchConfig{TP: 2}, Calibration: mustSeed(t)}
	var first []byte
	for i := range 3 {
		p, err := Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := canon.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Fatalf("run %d differs from run 0", i)
		}
	}
	// Reversing the tensor order does not change the figures (only the
	// headers digest, which hashes the list as given).
	rev := in
	rev.Headers.Tensors = nil
	for i := len(h.Tensors) - 1; i >= 0; i-- {
		rev.Headers.Tensors = append(rev.Headers.Tensors, h.Tensors[i])
	}
	p1, _ := Plan(in)
	p2, _ := Plan(rev)
	p2.HeadersDigest = p1.HeadersDigest
	b1, _ := canon.Marshal(p1)
	b2, _ := canon.Marshal(p2)
	if !bytes.Equal(b1, b2) {
		t.Fatal("tensor order changed the prediction")
	}
}

// assertNoFigures checks an unknown prediction claims nothing.
func assertNoFigures(t *testing.T, p Prediction) {
	t.Helper()
	if p.Fits || p.NumBlocks != 0 || p.KVCapacityTokens != 0 || p.MaxFeasibleModelLen != 0 || p.MaxConcurrencyAtMaxLen != 0 {
		t.Fatalf("unknown prediction claims figures: fits %v blocks %d tokens %d len %d conc %v", p.Fits, p.NumBlocks, p.KVCapacityTokens, p.MaxFeasibleModelLen, p.MaxConcurrencyAtMaxLen)
	}
	for name, c := range map[string]Component{"weights": p.WeightBytesPerRank, "activation": p.ActivationPeak, "non_torch": p.NonTorch, "cudagraph": p.CUDAGraphEstimate, "available": p.AvailableKVBytes} {
		if c.Status == StatusUnknown && (c.Bytes != 0 || c.Lower != 0 || c.Upper != 0 || c.Reason == "") {
			t.Fatalf("%s: unknown component with figures or without a reason: %+v", name, c)
		}
	}
}

// TestUnknownPathsNoConstantFallback walks every path that must answer
// unknown: each gives a reason naming the cause, no figure stands in for
// the missing one, and nothing claims a fit.
func TestUnknownPathsNoConstantFallback(t *testing.T) {
	llama := fixture.Build(fixture.Llama31_8B(), 1)
	arch := func(a, mt string) fixture.Spec {
		return withConfig(llama, func(m map[string]any) { m["architectures"] = []string{a}; m["model_type"] = mt })
	}
	cases := []struct {
		name    string
		spec    fixture.Spec
		version string
		l       LaunchConfig
		cal     *CalibrationSet
		reason  string
	}{
		{"unknown architecture", arch("FrobnicatorForCausalLM", "frob"), "", LaunchConfig{}, nil, "not in the calculator's dispatch table"},
		{"mamba", arch("MambaForCausalLM", "mamba"), "", LaunchConfig{}, nil, "hybrid_mamba"},
		{"linear attention", arch("Qwen3NextForCausalLM", "qwen3_next"), "", LaunchConfig{}, nil, "linear_attention"},
		{"encoder-decoder", arch("T5ForConditionalGeneration", "t5"), "", LaunchConfig{}, nil, "encoder_decoder"},
		{"unknown layer type", withConfig(fixture.Build(fixture.GptOss20B(), 1), func(m map[string]any) {
			lt := make([]string, 24)
			for i := range lt {
				lt[i] = "linear_attention"
			}
			m["layer_types"] = lt
		}), "", LaunchConfig{}, nil, "layer type"},
		{"bitsandbytes", withConfig(llama, func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "bitsandbytes"}
		}), "", LaunchConfig{}, nil, `quantization method "bitsandbytes"`},
		{"runtime fp8", llama, "", LaunchConfig{Quantization: "fp8"}, nil, "online transform"},
		{"mxfp4 before 0.10", fixture.Build(fixture.GptOss20B(), 1), "0.9.2", LaunchConfig{}, nil, `"mxfp4"`},
		{"unmatched tensor", func() fixture.Spec {
			s := llama
			s.Tensors = append(append([]fixture.Tensor{}, s.Tensors...), fixture.Tensor{Name: "vision_tower.patch_embed.weight", DType: "BF16", Shape: []int64{1024, 588}})
			return s
		}(), "", LaunchConfig{}, nil, "match no sharding rule"},
		{"kv dtype nvfp4", llama, "", LaunchConfig{KVCacheDType: "nvfp4"}, nil, "kv_cache_dtype"},
		{"pp activation", llama, "", LaunchConfig{PP: 2}, nil, "pp > 1"},
		{"dp non-torch", llama, "", LaunchConfig{DP: 2}, nil, "dp > 1"},
		{"tp 8 non-torch", fixture.Build(fixture.Llama31_70B(), 1), "", LaunchConfig{TP: 8}, nil, "tp=8"},
		{"one calibration entry for the class", fixture.Build(fixture.DeepSeekV2Lite(), 1), "", LaunchConfig{}, nil, "1 calibration entries for mechanism class mla/moe/text"},
		{"v0.21 cudagraph estimate", llama, "0.21.0", LaunchConfig{}, seedWithout(t, func(e CalibrationEntry) bool { return e.Logged.CUDAGraphEstimateGiB != nil }), "CUDA-graph memory estimate"},
		{"custom capture sizes with the estimate applied", llama, "0.21.0", LaunchConfig{CUDAGraphCaptureSizes: []int64{1, 2, 4}}, nil, "default capture sizes"},
		{"empty calibration", llama, "", LaunchConfig{}, &CalibrationSet{Schema: CalibrationSchema, SchemaVersion: 1}, "0 calibration entries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, cfg := headersOf(t, c.spec)
			v := c.version
			if v == "" {
				v = "0.11.0"
			}
			cal := mustSeed(t)
			if c.cal != nil {
				cal = *c.cal
			}
			p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, v), Launch: c.l, Calibration: cal})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status != PredictionUnknown {
				t.Fatalf("status %s, want unknown", p.Status)
			}
			if all := strings.Join(p.UnknownReasons, " | "); !strings.Contains(all, c.reason) {
				t.Fatalf("reasons %q do not contain %q", all, c.reason)
			}
			assertNoFigures(t, p)
		})
	}
}

// TestEnforceEagerMakesGraphsKnown: with --enforce-eager there are no
// graphs, so even the v0.21 accounting has a known (zero) estimate.
func TestEnforceEagerMakesGraphsKnown(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.21.0"), Launch: LaunchConfig{EnforceEager: true}, Calibration: mustSeed(t)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != PredictionKnown || p.CUDAGraphEstimate.Status != StatusDerived || p.CUDAGraphEstimate.Bytes != 0 || p.CUDAGraphApplied {
		t.Fatalf("eager v0.21: status %s %v graphs %+v applied %v", p.Status, p.UnknownReasons, p.CUDAGraphEstimate, p.CUDAGraphApplied)
	}
	// The entries the bands were fitted on are not from the 0.21 range:
	// either they state another version or none, and the plan says so.
	if n := strings.Join(p.Notes, "|"); !strings.Contains(n, "carried across versions") && !strings.Contains(n, "do not state their vLLM version") {
		t.Fatalf("a calibration from outside 0.21 used for 0.21 must say so: %v", p.Notes)
	}
}

// TestBadInputIsAnError: inputs that cannot describe a launch are errors
// with a one-line message, not predictions.
func TestBadInputIsAnError(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	base := PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.11.0"), Calibration: mustSeed(t)}
	cases := []struct {
		name string
		mod  func(in *PlanInput)
		want string
	}{
		{"no facts", func(in *PlanInput) { in.Facts = EngineFacts{} }, "no engine facts"},
		{"no memory", func(in *PlanInput) { in.Hardware.TotalMemoryBytes = 0 }, "--gpu-memory-gib"},
		{"config not json", func(in *PlanInput) { in.Config = []byte("{not json") }, "config.json: not a JSON object"},
		{"config wrong type", func(in *PlanInput) {
			in.Config = bytes.Replace(cfg, []byte(`"hidden_size":4096`), []byte(`"hidden_size":"4096"`), 1)
		}, "field hidden_size: want an integer"},
		{"util above 1", func(in *PlanInput) { in.Launch.GPUMemoryUtilization = 1.5 }, "--gpu-memory-utilization"},
		{"max len beyond the model", func(in *PlanInput) { in.Launch.MaxModelLen = 200000 }, "--max-model-len 200000"},
		{"pp beyond layers", func(in *PlanInput) { in.Launch.PP = 64 }, "pp=64 exceeds"},
		{"bad dtype", func(in *PlanInput) { in.Launch.DType = "int3" }, "--dtype"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			c.mod(&in)
			_, err := Plan(in)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, c.want)
			}
		})
	}
	if !bytes.Contains(cfg, []byte(`"hidden_size":4096`)) {
		t.Fatal("fixture config spelling changed; the wrong-type case no longer edits it")
	}
}

// TestFitAndMargin: a plan that fits reports a positive margin at the
// lower edge of its band; shrinking memory flips it with the margin's sign.
func TestFitAndMargin(t *testing.T) {
	p := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{MaxModelLen: 16000, BlockSize: 128})
	if !p.Fits || p.MarginBytes <= 0 || p.MarginBytes != p.AvailableKVBytes.Lower-p.Ranks[0].NeededKVBytes {
		t.Fatalf("fits %v margin %d available %+v needed %d", p.Fits, p.MarginBytes, p.AvailableKVBytes, p.Ranks[0].NeededKVBytes)
	}
	// One request at 16000 tokens: ceil(16000/128) = 125 blocks of
	// 128 × 131,072 bytes = 2,097,152,000 bytes.
	if p.Ranks[0].NeededKVBytes != 125*128*131072 || p.BlocksPerRequest != 125 {
		t.Fatalf("needed %d blocks/request %d", p.Ranks[0].NeededKVBytes, p.BlocksPerRequest)
	}
	// Concurrency = num_blocks / 125, as vLLM prints it (two decimals).
	if want := float64(int64(float64(p.NumBlocks)/125*100+0.5)) / 100; p.MaxConcurrencyAtMaxLen != want {
		t.Fatalf("concurrency %v, want %v", p.MaxConcurrencyAtMaxLen, want)
	}
	// Llama-3.1-70B BF16 on one H100 does not fit: the weights alone
	// exceed the requested memory.
	q := planOf(t, fixture.Build(fixture.Llama31_70B(), 1), "H100", LaunchConfig{MaxModelLen: 16000})
	if q.Fits || q.MarginBytes >= 0 || q.Status != PredictionKnown {
		t.Fatalf("70B on one H100: fits %v margin %d status %s %v", q.Fits, q.MarginBytes, q.Status, q.UnknownReasons)
	}
	if q.NumBlocks != 0 || q.MaxFeasibleModelLen != 0 {
		t.Fatalf("70B on one H100: blocks %d feasible len %d", q.NumBlocks, q.MaxFeasibleModelLen)
	}
}

// TestMaxFeasibleModelLen: the largest max_model_len whose one request
// fits the budget, bounded by max_position_embeddings.
func TestMaxFeasibleModelLen(t *testing.T) {
	// Qwen3-32B-like budget: give a 1 GiB KV budget to Llama-3.1-8B at
	// block 16: one request of L tokens needs ceil(L/16) × 16 × 131,072
	// bytes ≤ 1 GiB → ceil(L/16) ≤ 512 → L ≤ 8192.
	kv := int64(1 << 30)
	p := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{KVCacheMemoryBytes: &kv})
	if p.MaxFeasibleModelLen != 8192 {
		t.Fatalf("feasible len %d, want 8192", p.MaxFeasibleModelLen)
	}
	// With the whole H100 budget the model's own limit binds.
	q := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{})
	if q.MaxFeasibleModelLen != 131072 {
		t.Fatalf("feasible len %d, want the 131072 position limit", q.MaxFeasibleModelLen)
	}
}

func TestPredictionJSONHasEveryField(t *testing.T) {
	p := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{})
	b, err := canon.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"status", "unknown_reasons", "requested_bytes", "weight_bytes_per_rank", "activation_peak", "non_torch", "cudagraph_estimate", "cudagraph_applied", "available_kv_bytes", "kv_bytes_per_token", "block_size", "num_blocks", "kv_capacity_tokens", "max_feasible_model_len", "max_concurrency_at_max_len", "fits", "margin_bytes", "engine_facts_digest"} {
		if _, ok := m[k]; !ok {
			t.Errorf("record lacks %s", k)
		}
	}
}

// write405B lays out the 30-shard sparse checkpoint once.
func write405B(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	if _, err := fixture.Write(dir, fixture.Build(fixture.Llama31_405B(), 30)); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// planDir is the CLI's path: read every shard header and config.json,
// then plan.
func planDir(tb testing.TB, dir string, facts EngineFacts, cal CalibrationSet, hw HardwareSpec) Prediction {
	h := fixture.MustHeaders(tb, dir)
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: hw, Facts: facts, Launch: LaunchConfig{TP: 8}, Calibration: cal})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkPlan405BFromDisk is the same with header reading in the loop.
func BenchmarkPlan405BFromDisk(b *testing.B) {
	dir := write405B(b)
	facts, cal, hw := mustFacts(b, "0.11.0"), mustSeed(b), mustGPU(b, "H200")
	b.ResetTimer()
	for b.Loop() {
		planDir(b, dir, facts, cal, hw)
	}
}

// BenchmarkPlan405B plans a Llama-3.1-405B-like checkpoint split over 30
// shards (headers already read: 1,138 tensors) at TP 8 — the issue asks
// for well under 50 ms.
func BenchmarkPlan405B(b *testing.B) {
	spec := fixture.Build(fixture.Llama31_405B(), 30)
	h, cfg := headersOf(b, spec)
	in := PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(b, "H200"), Facts: mustFacts(b, "0.11.0"), Launch: LaunchConfig{TP: 8}, Calibration: mustSeed(b)}
	b.ResetTimer()
	for b.Loop() {
		if _, err := Plan(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoadWorkspaceNotIgnored: a quantized checkpoint's kernel-preparation
// transient is reported unknown with a note, never silently zero; an
// unquantized one loads in place.
func TestLoadWorkspaceNotIgnored(t *testing.T) {
	awq := planOf(t, fixture.Must(fixture.AWQ(fixture.Build(fixture.Llama31_8B(), 1), 128)), "H100", LaunchConfig{})
	if awq.LoadWorkspace.Status != StatusUnknown || awq.LoadWorkspace.Bytes != 0 || !strings.Contains(awq.LoadWorkspace.Reason, "awq") {
		t.Fatalf("AWQ load workspace %+v", awq.LoadWorkspace)
	}
	if !strings.Contains(strings.Join(awq.Notes, "|"), "load workspace") {
		t.Fatalf("notes %v do not mention the load workspace", awq.Notes)
	}
	bf16 := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{})
	if bf16.LoadWorkspace.Status != StatusDerived || bf16.LoadWorkspace.Bytes != 0 {
		t.Fatalf("BF16 load workspace %+v", bf16.LoadWorkspace)
	}
}

// TestMarlinWorkspaceFromQuantSpec: with the quantization adapter's spec
// the Marlin repack is accounted — one extra copy of the largest packed
// weight while loading, and with act-order a kept g_idx sort permutation
// (I32 per input feature) per linear.
func TestMarlinWorkspaceFromQuantSpec(t *testing.T) {
	spec := fixture.Must(fixture.GPTQ(fixture.Build(fixture.Llama31_8B(), 1), 4, 128, true))
	h, cfg := headersOf(t, spec)
	qs := quant.QuantizationSpec{Method: "gptq", WeightFormat: "int4", Workspaces: []quant.Workspace{{
		Kind: "marlin_repack", Transient: "largest_packed_weight", PerLinear: []string{"g_idx_sort_indices I32 [in]"},
	}}}
	run := func(tp int) Prediction {
		p, err := Plan(PlanInput{Headers: h, Config: cfg, Quant: &qs, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.11.0"), Launch: LaunchConfig{TP: tp}, Calibration: mustSeed(t)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := run(1)
	// The largest packed weight is a gate/up qweight: I32 [4096·4/32, 14336]
	// = 512 × 14336 × 4 bytes = 29,360,128.
	if p.LoadWorkspace.Status != StatusDerived || p.LoadWorkspace.Bytes != 512*14336*4 {
		t.Fatalf("load workspace %+v, want 29,360,128 derived", p.LoadWorkspace)
	}
	// Sort indices: every linear's g_idx again, I32 per input feature:
	// per layer q/k/v/gate/up 5 × 4096 + o 4096 + down 14336 = 38,912
	// features × 4 bytes × 32 layers = 4,980,736.
	if got := p.Ranks[0].Weights.KernelExtraBytes; got != (5*4096+4096+14336)*4*32 {
		t.Fatalf("kept sort indices %d, want 4,980,736", got)
	}
	// At TP 2 the column-parallel g_idx stay whole (input not split), the
	// row-parallel ones halve: (5·4096 + 4096/2 + 14336/2) × 4 × 32.
	if got := run(2).Ranks[0].Weights.KernelExtraBytes; got != (5*4096+4096/2+14336/2)*4*32 {
		t.Fatalf("tp 2 sort indices %d, want %d", got, (5*4096+4096/2+14336/2)*4*32)
	}
	// A workspace kind the calculator does not know stays unknown.
	qs.Workspaces[0].Kind = "mystery"
	if q := run(1); q.LoadWorkspace.Known() {
		t.Fatalf("unknown workspace kind: %+v", q.LoadWorkspace)
	}
}

// TestCrossNotes: a plan on the calibration's own GPU and version carries
// no cross-over note; another GPU says the bands were carried across.
func TestCrossNotes(t *testing.T) {
	same := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "H100", LaunchConfig{})
	if n := strings.Join(same.Notes, "|"); strings.Contains(n, "carried across") {
		t.Fatalf("H100 / 0.11 plan notes %q", n)
	}
	other := planOf(t, fixture.Build(fixture.Llama31_8B(), 1), "L40S", LaunchConfig{MaxModelLen: 8192})
	n := strings.Join(other.Notes, "|")
	if !strings.Contains(n, "carried across hardware") || !strings.Contains(n, "nominal capacity") {
		t.Fatalf("L40S plan notes %q", n)
	}
	// L40S (48 GiB) gets vLLM's small batch defaults: 2048 tokens, 256
	// sequences, so the sampler driver is 256 × 128256 × 4 bytes.
	if other.Launch.MaxNumBatchedTokens != 2048 || other.Launch.MaxNumSeqs != 256 {
		t.Fatalf("L40S defaults %d/%d", other.Launch.MaxNumBatchedTokens, other.Launch.MaxNumSeqs)
	}
}

// TestHeaderWarningsNoted: a reader warning (index total_size disagreeing
// with the headers) reaches the prediction's notes.
func TestHeaderWarningsNoted(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	h.Warnings = []string{"model.safetensors.index.json: total_size 1 disagrees with the headers' 16060522496"}
	p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, "0.11.0"), Calibration: mustSeed(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.Notes, "|"), "total_size 1 disagrees") {
		t.Fatalf("notes %v", p.Notes)
	}
}

// TestPlanVersionFallback: versions outside the pinned ranges plan with
// the nearest facts, a note naming them and a wider available-KV band.
func TestPlanVersionFallback(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	plan := func(v string) Prediction {
		t.Helper()
		p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, v), Launch: LaunchConfig{MaxModelLen: 16000, EnforceEager: true}, Calibration: mustSeed(t)})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		return p
	}
	cases := []struct{ version, base, label string }{
		{"0.14.0", "0.11.0", "0.10"}, {"0.19.0", "0.11.0", "0.10"}, {"0.33.0", "0.21.0", "0.21"}, {"0.40.0", "0.21.0", "0.21"},
	}
	for _, c := range cases {
		p, b := plan(c.version), plan(c.base)
		if !slices.ContainsFunc(p.Notes, func(n string) bool {
			return strings.Contains(n, "vLLM "+c.version+" planned with the facts of "+c.label)
		}) {
			t.Errorf("%s: no fallback note in %q", c.version, p.Notes)
		}
		if p.Status != b.Status || p.EngineFactsDigest != b.EngineFactsDigest {
			t.Errorf("%s: status %s digest %s, want the pinned %s plan's %s %s", c.version, p.Status, p.EngineFactsDigest, c.base, b.Status, b.EngineFactsDigest)
		}
		if p.Status == PredictionKnown && (p.AvailableKVBytes.Lower >= b.AvailableKVBytes.Lower || p.AvailableKVBytes.Upper <= b.AvailableKVBytes.Upper) {
			t.Errorf("%s: band [%d, %d] not wider than %s's [%d, %d]", c.version, p.AvailableKVBytes.Lower, p.AvailableKVBytes.Upper, c.base, b.AvailableKVBytes.Lower, b.AvailableKVBytes.Upper)
		}
	}
}

// TestPlanV0Unknown: V0's accounting (one free-memory drop) is not the
// formula the calculator implements, so a 0.6/0.7 plan is unknown and
// says why rather than giving a V1 figure.
func TestPlanV0Unknown(t *testing.T) {
	h, cfg := headersOf(t, fixture.Build(fixture.Llama31_8B(), 1))
	for _, v := range []string{"0.6.3", "0.7.3"} {
		p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, v), Launch: LaunchConfig{MaxModelLen: 16000}, Calibration: mustSeed(t)})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if p.Status != PredictionUnknown || !slices.ContainsFunc(p.UnknownReasons, func(r string) bool { return strings.Contains(r, "v0_free_memory_drop") }) {
			t.Errorf("%s: status %s reasons %q, want unknown naming the V0 formula", v, p.Status, p.UnknownReasons)
		}
	}
}
