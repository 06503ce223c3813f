package memory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

func cfgOf(t *testing.T, m fixture.Model) []byte {
	t.Helper()
	b, err := json.Marshal(m.Config())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseArchFamilies(t *testing.T) {
	cases := []struct {
		name  string
		cfg   []byte
		check func(t *testing.T, a ArchFacts)
	}{
		{"Llama-3.1-8B: head_dim from hidden/heads", cfgOf(t, fixture.Llama31_8B()), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechDense || a.HeadDim != 4096/32 || a.NumKVHeads != 8 || a.Family != "llama" || a.FFN != "dense" || a.TieWordEmbeddings {
				t.Fatalf("%+v", a)
			}
		}},
		{"Qwen3-30B-A3B: MoE counts", cfgOf(t, fixture.Qwen3_30B_A3B()), func(t *testing.T, a ArchFacts) {
			if a.MoE == nil || a.MoE.NumExperts != 128 || a.MoE.TopK != 8 || a.MoE.ExpertIntermediate != 768 || a.HeadDim != 128 {
				t.Fatalf("%+v %+v", a, a.MoE)
			}
		}},
		{"DeepSeek-V2-Lite: MLA and n_routed_experts", cfgOf(t, fixture.DeepSeekV2Lite()), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechMLA || a.MLA.KVLoraRank != 512 || a.MLA.QKRopeHeadDim != 64 || a.MLA.QLoraRank != 0 ||
				a.MoE.NumExperts != 64 || a.MoE.NumSharedExperts != 2 || a.MoE.FirstKDenseReplace != 1 || a.RotaryDim != 64 {
				t.Fatalf("%+v %+v %+v", a, a.MLA, a.MoE)
			}
		}},
		{"Gemma-2-9B: even layers sliding", cfgOf(t, fixture.Gemma2_9B()), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechHybridSliding || a.SlidingWindow != 4096 || a.LayerKinds[0] != LayerSliding || a.LayerKinds[1] != LayerFull || !a.TieWordEmbeddings {
				t.Fatalf("%+v", a)
			}
		}},
		{"gpt-oss-20b: layer_types and MXFP4", cfgOf(t, fixture.GptOss20B()), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechHybridSliding || a.SlidingWindow != 128 || a.Quant.Method != "mxfp4" || a.MoE.NumExperts != 32 || a.MoE.ExpertIntermediate != 2880 {
				t.Fatalf("%+v", a)
			}
		}},
		{"Qwen2 with use_sliding_window false stays dense", []byte(`{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":896,"num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,"vocab_size":151936,"max_position_embeddings":32768,"sliding_window":32768,"use_sliding_window":false,"tie_word_embeddings":true}`), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechDense || a.HeadDim != 64 {
				t.Fatalf("%+v", a)
			}
		}},
		{"Mistral v0.1: every layer sliding", []byte(`{"architectures":["MistralForCausalLM"],"model_type":"mistral","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"vocab_size":32000,"max_position_embeddings":32768,"sliding_window":4096}`), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechSlidingWindow || a.LayerKinds[31] != LayerSliding {
				t.Fatalf("%+v", a)
			}
		}},
		{"multimodal wrapper reads text_config", []byte(`{"architectures":["Mistral3ForConditionalGeneration"],"model_type":"mistral3","text_config":{"model_type":"mistral","hidden_size":5120,"num_hidden_layers":40,"num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"vocab_size":131072,"max_position_embeddings":131072},"torch_dtype":"bfloat16"}`), func(t *testing.T, a ArchFacts) {
			if !a.Multimodal || a.Mechanism != MechDense || a.HiddenSize != 5120 || a.TorchDType != "bfloat16" {
				t.Fatalf("%+v", a)
			}
		}},
		{"Mamba: named, not implemented", []byte(`{"architectures":["MambaForCausalLM"],"model_type":"mamba"}`), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechHybridMamba || !strings.Contains(a.UnknownReason, "not implemented") {
				t.Fatalf("%+v", a)
			}
		}},
		{"unknown architecture", []byte(`{"architectures":["NewThingForCausalLM"],"model_type":"new"}`), func(t *testing.T, a ArchFacts) {
			if a.Mechanism != MechUnknown || !strings.Contains(a.UnknownReason, "NewThingForCausalLM") {
				t.Fatalf("%+v", a)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseArch(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, a)
		})
	}
}

func TestParseArchStrict(t *testing.T) {
	cases := []struct {
		cfg, want string
	}{
		{`not json`, "config.json: not a JSON object"},
		{`[1,2]`, "config.json: not a JSON object"},
		{`{} {}`, "trailing data"},
		{`{"model_type":"llama"}`, "architectures is missing"},
		{`{"architectures":"LlamaForCausalLM"}`, "field architectures: want a list of strings"},
		{`{"architectures":["LlamaForCausalLM"],"hidden_size":"4096"}`, "field hidden_size: want an integer"},
		{`{"architectures":["LlamaForCausalLM"],"hidden_size":4096.5,"num_hidden_layers":1}`, "field hidden_size: want an integer"},
		{`{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":1}`, "max_position_embeddings is missing"},
		{`{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":1,"max_position_embeddings":8,"tie_word_embeddings":"yes"}`, "field tie_word_embeddings: want true or false"},
		{`{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":1,"max_position_embeddings":8,"quantization_config":{"bits":4}}`, "quant_method is missing"},
		{`{"architectures":["Mistral3ForConditionalGeneration"],"model_type":"mistral3"}`, "text_config is missing"},
		{`{"architectures":["GptOssForCausalLM"],"hidden_size":2880,"num_hidden_layers":2,"num_attention_heads":64,"vocab_size":1,"max_position_embeddings":8,"num_local_experts":32,"num_experts_per_tok":4,"sliding_window":128,"layer_types":["full_attention"]}`, "layer_types has 1 entries for 2 layers"},
		{`{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":2048,"num_hidden_layers":2,"num_attention_heads":32,"vocab_size":1,"max_position_embeddings":8}`, "none of num_experts"},
	}
	for _, c := range cases {
		_, err := ParseArch([]byte(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line containing %q", c.cfg, err, c.want)
		}
	}
}

// Architectures the calculator does not model answer unknown with what
// vLLM's registry says of them.
func TestUnmodelledArchitectureReasons(t *testing.T) {
	for _, c := range []struct {
		arch   string
		mech   Mechanism
		reason string
	}{
		{"BertModel", MechPooling, "pooling"},
		{"XLMRobertaModel", MechPooling, "pooling"},
		{"T5ForConditionalGeneration", MechEncoderDec, "does not list it"},
		{"BartForConditionalGeneration", MechEncoderDec, "removed in 0.10.2"},
		{"WhisperForConditionalGeneration", MechEncoderDec, "not implemented"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			a, err := ParseArch([]byte(`{"architectures":["` + c.arch + `"],"model_type":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			if a.Mechanism != c.mech || !strings.Contains(a.UnknownReason, c.reason) {
				t.Errorf("mechanism %s reason %q, want %s and %q", a.Mechanism, a.UnknownReason, c.mech, c.reason)
			}
		})
	}
}
