package memory

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// KV bytes per token per rank (reference/evidence.md §3.5.3), by hand.
func TestKVPerTokenGQA(t *testing.T) {
	cases := []struct {
		name string
		spec fixture.Spec
		l    LaunchConfig
		want int64
	}{
		// Llama-3.1-8B: 2 × 32 layers × 8 KV heads × 128 × 2 bytes = 131,072 (128 KiB).
		{"Llama-3.1-8B", fixture.Build(fixture.Llama31_8B(), 1), LaunchConfig{}, 2 * 32 * 8 * 128 * 2},
		// fp8 KV: 2 × 32 × 8 × 128 × 1 = 65,536.
		{"Llama-3.1-8B fp8", fixture.Build(fixture.Llama31_8B(), 1), LaunchConfig{KVCacheDType: "fp8_e4m3"}, 2 * 32 * 8 * 128},
		// Llama-3.1-70B: 2 × 80 × 8 × 128 × 2 = 327,680 (320 KiB) at TP 1 …
		{"Llama-3.1-70B tp1", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{}, 2 * 80 * 8 * 128 * 2},
		// … 2 × 80 × 2 × 128 × 2 = 81,920 at TP 4 …
		{"Llama-3.1-70B tp4", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{TP: 4}, 2 * 80 * 2 * 128 * 2},
		// … 2 × 80 × 1 × 128 × 2 = 40,960 at TP 8.
		{"Llama-3.1-70B tp8", fixture.Build(fixture.Llama31_70B(), 1), LaunchConfig{TP: 8}, 2 * 80 * 1 * 128 * 2},
		// Qwen3-30B-A3B: 2 × 48 × 4 × 128 × 2 = 98,304 at TP 1.
		{"Qwen3-30B-A3B", fixture.Build(fixture.Qwen3_30B_A3B(), 1), LaunchConfig{}, 2 * 48 * 4 * 128 * 2},
		// Gemma-2-9B counted as full attention: 2 × 42 × 8 × 256 × 2 = 344,064.
		{"Gemma-2-9B", fixture.Build(fixture.Gemma2_9B(), 1), LaunchConfig{}, 2 * 42 * 8 * 256 * 2},
		// gpt-oss-20b: 2 × 24 × 8 × 64 × 2 = 49,152.
		{"gpt-oss-20b", fixture.Build(fixture.GptOss20B(), 1), LaunchConfig{}, 2 * 24 * 8 * 64 * 2},
		// PP 2 over Llama-3.1-8B: 16 layers per stage → 65,536 on stage 0.
		{"Llama-3.1-8B pp2", fixture.Build(fixture.Llama31_8B(), 1), LaunchConfig{PP: 2}, 2 * 16 * 8 * 128 * 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planOf(t, c.spec, "H100", c.l)
			if p.KVBytesPerToken != c.want {
				t.Fatalf("KV bytes per token %d, want %d", p.KVBytesPerToken, c.want)
			}
		})
	}
}

// TestKVHeadsReplicatedAboveTP: 8 KV heads at TP 16 still cost one head
// per GPU — the KV figure stops shrinking, and each rank's k_proj is one
// whole head (128 × 8192 × 2 bytes), not a sixteenth of eight.
func TestKVHeadsReplicatedAboveTP(t *testing.T) {
	p := planOf(t, fixture.Build(fixture.Llama31_70B(), 1), "H100", LaunchConfig{TP: 16})
	if want := int64(2 * 80 * 1 * 128 * 2); p.KVBytesPerToken != want {
		t.Fatalf("TP 16 KV bytes per token %d, want %d", p.KVBytesPerToken, want)
	}
	// Weights at TP 16: q, o and the MLP ÷ 16, k and v one head each.
	const (
		qoMLP = 8192*8192 + 8192*8192 + 3*28672*8192
		kv    = 2 * 128 * 8192
	)
	want := int64((80*(qoMLP/16+kv+2*8192)+2*(128256/16)*8192+8192)*2 + 131072*128*2)
	if p.WeightBytesPerRank.Bytes != want {
		t.Fatalf("TP 16 weights %d, want %d (diff %d)", p.WeightBytesPerRank.Bytes, want, p.WeightBytesPerRank.Bytes-want)
	}
}

// TestKVPerTokenMLA: one latent of kv_lora_rank + qk_rope_head_dim per
// token and layer, no factor 2, not split by TP.
func TestKVPerTokenMLA(t *testing.T) {
	for _, tp := range []int{1, 2, 4} {
		p := planOf(t, fixture.Build(fixture.DeepSeekV2Lite(), 1), "H100", LaunchConfig{TP: tp})
		// DeepSeek-V2-Lite: 27 layers × (512 + 64) × 2 bytes = 31,104.
		if want := int64(27 * (512 + 64) * 2); p.KVBytesPerToken != want {
			t.Fatalf("tp %d: MLA KV bytes per token %d, want %d", tp, p.KVBytesPerToken, want)
		}
		// FlashMLA on an SM90 GPU forces block size 64.
		if p.BlockSize != 64 {
			t.Fatalf("tp %d: MLA block size %d on H100, want 64", tp, p.BlockSize)
		}
	}
	// DeepSeek-V3 (61 layers, 512 + 64): 61 × 576 × 2 = 70,272 — the
	// reference's worked example.
	a := ArchFacts{Mechanism: MechMLA, MLA: &MLAFacts{KVLoraRank: 512, QKRopeHeadDim: 64}}
	per, err := kvBytesPerTokenLayer(a, 8, 2)
	if err != nil || 61*per != 70272 {
		t.Fatalf("DeepSeek-V3 per token %d×61 (%v), want 70,272", per, err)
	}
}

// TestSlidingWindowBounded: with the hybrid KV cache manager a Gemma-2
// request needs the window (plus a scheduled chunk and one block) on its
// sliding layers, and the full context only on the full ones.
func TestSlidingWindowBounded(t *testing.T) {
	kvMem := int64(20 << 30)
	l := LaunchConfig{MaxModelLen: 8192, MaxNumBatchedTokens: 2048, BlockSize: 16, KVCacheMemoryBytes: &kvMem}
	spec := fixture.Build(fixture.Gemma2_9B(), 1)
	h, cfg := headersOf(t, spec)
	run := func(version string) Prediction {
		p, err := Plan(PlanInput{Headers: h, Config: cfg, Hardware: mustGPU(t, "H100"), Facts: mustFacts(t, version), Launch: l, Calibration: mustSeed(t)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	hybrid, flat := run("0.11.0"), run("0.9.2")
	// Per layer: 2 × 8 heads × 256 × 2 = 8,192 bytes per token; a page
	// is 16 tokens = 131,072 bytes.
	// Hybrid: 21 sliding + 21 full layers → two groups of 21.
	//   sliding pages = ceil(min(4096 − 1 + 2048, 8192) / 16) + 1 = ceil(6143/16) + 1 = 385
	//   full pages    = 8192 / 16 = 512
	if hybrid.BlocksPerRequest != 385+512 {
		t.Fatalf("hybrid blocks per request %d, want 897", hybrid.BlocksPerRequest)
	}
	//   num_blocks = 20 GiB // 131,072 // 21 = 7,801; tokens = 7,801 // 2 × 16 = 62,400
	if hybrid.NumBlocks != 21474836480/131072/21 || hybrid.KVCapacityTokens != 7801/2*16 {
		t.Fatalf("hybrid blocks %d tokens %d, want 7801 and 62400", hybrid.NumBlocks, hybrid.KVCapacityTokens)
	}
	// Without the hybrid manager every layer is full attention: one group
	// of 42, 512 pages per request, num_blocks = 20 GiB // 131,072 // 42 = 3,900.
	if flat.BlocksPerRequest != 512 || flat.NumBlocks != 21474836480/131072/42 {
		t.Fatalf("flat blocks per request %d num_blocks %d, want 512 and 3900", flat.BlocksPerRequest, flat.NumBlocks)
	}
	// The window buys concurrency: 7,801 / 897 = 8.70 requests against
	// 3,900 / 512 = 7.62.
	if hybrid.MaxConcurrencyAtMaxLen != 8.70 || flat.MaxConcurrencyAtMaxLen != 7.62 {
		t.Fatalf("concurrency hybrid %v flat %v, want 8.70 and 7.62", hybrid.MaxConcurrencyAtMaxLen, flat.MaxConcurrencyAtMaxLen)
	}
}

func TestKVGroups(t *testing.T) {
	kinds := func(n int, sliding func(i int) bool) []LayerKind {
		out := make([]LayerKind, n)
		for i := range out {
			out[i] = LayerFull
			if sliding(i) {
				out[i] = LayerSliding
			}
		}
		return out
	}
	// gpt-oss-20b: 12 sliding (even) + 12 full → 2 groups of 12.
	g := kvGroups(kinds(24, func(i int) bool { return i%2 == 0 }), true)
	if len(g) != 2 || g[0].Kind != LayerSliding || len(g[0].Layers) != 12 || len(g[1].Layers) != 12 {
		t.Fatalf("gpt-oss groups %+v", g)
	}
	// Gemma-3 5:1 over 34 layers: 29 sliding, 5 full → group size 5, six
	// sliding groups (layers[i::6]) and one full group.
	g = kvGroups(kinds(34, func(i int) bool { return i%6 != 5 }), true)
	if len(g) != 7 {
		t.Fatalf("5:1 groups %d, want 7", len(g))
	}
	// The sliding list is 0,1,2,3,4,6,7,…; its [0::6] picks 0, 7, 14, 21, 28.
	if got := g[0].Layers; len(got) != 5 || got[0] != 0 || got[1] != 7 || got[4] != 28 {
		t.Fatalf("first sliding group %v, want [0 7 14 21 28]", got)
	}
	// 12 sliding + 13 full (gpt-oss + an EAGLE layer): 13 < 1.5 × 12, so
	// the group size is 13 — one group each, the sliding one padded.
	g = kvGroups(kinds(25, func(i int) bool { return i%2 == 1 }), true)
	if len(g) != 2 {
		t.Fatalf("12+13 groups %+v, want 2", g)
	}
	// Hybrid manager off: one full-attention group.
	if g = kvGroups(kinds(24, func(i int) bool { return i%2 == 0 }), false); len(g) != 1 || g[0].Kind != LayerFull {
		t.Fatalf("non-hybrid groups %+v", g)
	}
}
