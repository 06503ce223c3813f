package memory

import (
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// TestWeightsParallelLayouts: data and expert parallelism, computed by hand
// from the fixture shapes (none of it calls the calculator). vLLM's
// FusedMoEParallelConfig.make spans the MoE layer over TP × DP devices:
// with --enable-expert-parallel each of the EP = TP × DP ranks holds
// experts/EP whole experts (linear placement); without it every expert is
// split TP × DP ways. Attention, dense MLPs, shared experts, norms, router
// and vocabulary are split by TP only: each DP rank holds a full TP copy.
// https://github.com/vllm-project/vllm/blob/00c1c6a2054b7027369c2a460cc2181a9b86293d/vllm/model_executor/layers/fused_moe/config.py
func TestWeightsParallelLayouts(t *testing.T) {
	const (
		// Qwen3-30B-A3B (see TestWeightsPerGPU): attention, 128 experts of
		// 3·768·2048, norms and router, untied vocab 151936, rope cache.
		q3Attn    = 4096*2048 + 512*2048 + 512*2048 + 2048*4096
		q3Experts = 128 * 3 * 768 * 2048
		q3Small   = 2*2048 + 2*128 + 128*2048
		q3Rope    = 40960 * 128 * 2
		// TP 1 × DP 8: attention whole, 128/8 = 16 experts (EP) or every
		// expert ÷ 8 (no EP): both are an eighth of the expert bytes.
		q3DP8 = (48*(q3Attn+q3Experts/8+q3Small)+2*151936*2048+2048)*2 + q3Rope
		// TP 2 × DP 4: attention ÷ 2 (4 KV heads ÷ 2), vocab ÷ 2, experts ÷ 8.
		q3TP2DP4 = (48*(q3Attn/2+q3Experts/8+q3Small)+2*(151936/2)*2048+2048)*2 + q3Rope

		// DeepSeek-V2-Lite (see TestWeightsPerGPU): 64 routed experts of
		// 3·1408·2048 in layers 1–26; the router and the shared experts
		// (a plain MLP, TP-split, whole at TP 1) stay on every rank.
		dsAttn   = 16*192*2048 + 576*2048 + 512 + 16*256*512 + 2048*16*128 + 2*2048
		dsDense  = 3 * 10944 * 2048
		dsRouted = 64 * 3 * 1408 * 2048
		dsRest   = 64*2048 + 3*2816*2048
		dsAbsorb = 27 * 16 * 256 * 512
		dsRope   = 163840 * 64 * 2
		dsTP1    = (27*dsAttn+dsDense+26*(dsRouted+dsRest)+2*102400*2048+2048)*2 + dsAbsorb*2 + dsRope
		// TP 1 × DP 8 with EP: 64/8 = 8 experts per rank.
		dsDP8 = (27*dsAttn+dsDense+26*(dsRouted/8+dsRest)+2*102400*2048+2048)*2 + dsAbsorb*2 + dsRope

		// Llama-3.1-70B at TP 8 (see TestWeightsPerGPU): DP replicates it.
		l70Lin  = 8192*8192 + 1024*8192 + 1024*8192 + 8192*8192 + 3*28672*8192
		l70TP8  = (80*(l70Lin/8+2*8192)+2*(128256/8)*8192+8192)*2 + 131072*128*2
		l70TP1  = (80*(l70Lin+2*8192)+2*128256*8192+8192)*2 + 131072*128*2
		q3KVTok = 48 * 2 * 4 * 128 * 2 // K and V, 4 KV heads of 128, BF16
		dsKVTok = 27 * (512 + 64) * 2  // MLA latent + rope key, BF16
		l70KV8  = 80 * 2 * 1 * 128 * 2 // 8 KV heads ÷ TP 8
	)
	cases := []struct {
		name    string
		spec    fixture.Spec
		l       LaunchConfig
		weights int64
		kvTok   int64
		gpus    int
	}{
		{"Qwen3-30B-A3B tp1 dp8 ep", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{DP: 8, EnableExpertParallel: true}, q3DP8, q3KVTok, 8},
		{"Qwen3-30B-A3B tp1 dp8 no ep", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{DP: 8}, q3DP8, q3KVTok, 8},
		{"Qwen3-30B-A3B tp2 dp4 ep", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{TP: 2, DP: 4, EnableExpertParallel: true}, q3TP2DP4, q3KVTok / 2, 8},
		{"Qwen3-30B-A3B tp2 dp4 no ep", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{TP: 2, DP: 4}, q3TP2DP4, q3KVTok / 2, 8},
		{"DeepSeek-V2-Lite tp1 dp8 ep", fixture.Build(fixture.DeepSeekV2Lite(), 1), LaunchConfig{DP: 8, EnableExpertParallel: true}, dsDP8, dsKVTok, 8},
		{"DeepSeek-V2-Lite tp1 dp1 ep (no-op)", fixture.Build(fixture.DeepSeekV2Lite(), 1), LaunchConfig{EnableExpertParallel: true}, dsTP1, dsKVTok, 1},
		{"Llama-3.1-70B tp8", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{TP: 8}, l70TP8, l70KV8, 8},
		{"Llama-3.1-70B tp8 dp2", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{TP: 8, DP: 2}, l70TP8, l70KV8, 16},
		{"Llama-3.1-70B tp1 dp8 ep (dense)", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{DP: 8, EnableExpertParallel: true}, l70TP1, l70KV8 * 8, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planOf(t, c.spec, "H100", c.l)
			if p.WeightBytesPerRank.Status != StatusDerived {
				t.Fatalf("weights %s: %s", p.WeightBytesPerRank.Status, p.WeightBytesPerRank.Reason)
			}
			if got := p.WeightBytesPerRank.Bytes; got != c.weights {
				t.Errorf("weights per rank %d, want %d (diff %d)", got, c.weights, got-c.weights)
			}
			if p.KVBytesPerToken != c.kvTok {
				t.Errorf("KV bytes per token per rank %d, want %d", p.KVBytesPerToken, c.kvTok)
			}
			if p.GPUsNeeded != c.gpus {
				t.Errorf("gpus needed %d, want %d", p.GPUsNeeded, c.gpus)
			}
		})
	}
}

// TestParallelNotes: DP > 1 without a calibration is unknown with the
// reason, never a guess; expert parallelism on a dense model, or with
// TP × DP = 1, is accepted (vLLM accepts it) and said in a note.
func TestParallelNotes(t *testing.T) {
	cases := []struct {
		name    string
		spec    fixture.Spec
		l       LaunchConfig
		unknown string // a substring of an unknown reason; "" = none expected
		note    string // a substring of a note; "" = none expected
	}{
		{"dp8 non-torch unknown", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{DP: 8, EnableExpertParallel: true}, "dp > 1", "per DP rank"},
		{"ep on a dense model", fixture.Build(fixture.Llama31_8B(), 1), LaunchConfig{TP: 2, EnableExpertParallel: true}, "", "no experts"},
		{"ep on one GPU", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{EnableExpertParallel: true}, "", "tp × dp = 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planOf(t, c.spec, "H100", c.l)
			if c.unknown != "" && (p.Status == PredictionKnown || !anyContains(p.UnknownReasons, c.unknown)) {
				t.Errorf("status %s, reasons %q: want unknown with %q", p.Status, p.UnknownReasons, c.unknown)
			}
			if c.note != "" && !anyContains(p.Notes, c.note) {
				t.Errorf("notes %q: want one with %q", p.Notes, c.note)
			}
		})
	}
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
