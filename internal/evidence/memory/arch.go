package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// LayerKind is the attention kind of one decoder layer.
type LayerKind string

// Layer kinds.
const (
	LayerFull    LayerKind = "full"
	LayerSliding LayerKind = "sliding"
)

// ArchFacts are the architecture facts the calculator reads from
// config.json (the text model's, for multimodal wrappers). Parsing is
// strict about types: a present field of the wrong type is an error, not
// a default.
type ArchFacts struct {
	Architecture string    `json:"architecture"` // architectures[0]
	ModelType    string    `json:"model_type"`
	Family       string    `json:"family"` // dispatch family: "llama", "qwen3_moe", "deepseek_v2", "gemma2", "gpt_oss", …
	Mechanism    Mechanism `json:"mechanism"`
	FFN          string    `json:"ffn"` // "dense" or "moe"
	Multimodal   bool      `json:"multimodal"`
	// UnknownReason is set when Mechanism is one the calculator does not
	// implement (or the architecture is not in the dispatch table).
	UnknownReason string `json:"unknown_reason"`

	HiddenSize        int64 `json:"hidden_size"`
	NumLayers         int64 `json:"num_layers"`
	NumHeads          int64 `json:"num_heads"`
	NumKVHeads        int64 `json:"num_kv_heads"`
	HeadDim           int64 `json:"head_dim"`   // K head size
	HeadDimV          int64 `json:"head_dim_v"` // V head size (= HeadDim unless the model says otherwise)
	VocabSize         int64 `json:"vocab_size"`
	IntermediateSize  int64 `json:"intermediate_size"`
	MaxPosition       int64 `json:"max_position_embeddings"`
	TieWordEmbeddings bool  `json:"tie_word_embeddings"`
	RotaryDim         int64 `json:"rotary_dim"`
	// TorchDType is config.json's torch_dtype ("bfloat16", "float16",
	// "float32"); "" when absent.
	TorchDType string `json:"torch_dtype"`

	MoE *MoEFacts `json:"moe"`
	MLA *MLAFacts `json:"mla"`

	SlidingWindow int64       `json:"sliding_window"` // 0 = none
	LayerKinds    []LayerKind `json:"layer_kinds"`    // per layer, len NumLayers

	Quant QuantFacts `json:"quant"`
}

// MoEFacts are the mixture-of-experts facts.
type MoEFacts struct {
	NumExperts           int64 `json:"num_experts"`
	TopK                 int64 `json:"top_k"`
	NumSharedExperts     int64 `json:"num_shared_experts"`
	ExpertIntermediate   int64 `json:"expert_intermediate_size"`
	FirstKDenseReplace   int64 `json:"first_k_dense_replace"`
	SharedExpertIntermed int64 `json:"shared_expert_intermediate_size"`
}

// MLAFacts are DeepSeek-style multi-head latent attention facts.
type MLAFacts struct {
	KVLoraRank    int64 `json:"kv_lora_rank"`
	QLoraRank     int64 `json:"q_lora_rank"` // 0 = none
	QKRopeHeadDim int64 `json:"qk_rope_head_dim"`
	QKNopeHeadDim int64 `json:"qk_nope_head_dim"`
	VHeadDim      int64 `json:"v_head_dim"`
}

// QuantFacts are what config.json's quantization_config says; the
// calculator only uses them to tell quantization auxiliaries from plain
// float weights and to refuse layouts it does not model.
type QuantFacts struct {
	Method string `json:"method"` // quant_method as written ("awq", "gptq", "fp8", "compressed-tensors", "mxfp4", "bitsandbytes", "modelopt", …); "" = none
	Format string `json:"format"` // compressed-tensors format, "" otherwise
}

// family describes one dispatchable architecture.
type family struct {
	name      string
	mechanism func(c cfg, a *ArchFacts) error // fills mechanism-specific facts
	ffn       string
}

// notImplemented names architectures narwhal recognises but whose
// sequence-mixing mechanism the calculator does not implement: they answer
// unknown with this reason, never an estimate (INV-32).
var notImplemented = map[string]Mechanism{
	"MambaForCausalLM": MechHybridMamba, "Mamba2ForCausalLM": MechHybridMamba,
	"JambaForCausalLM": MechHybridMamba, "FalconMambaForCausalLM": MechHybridMamba,
	"FalconH1ForCausalLM": MechHybridMamba, "NemotronHForCausalLM": MechHybridMamba,
	"Zamba2ForCausalLM": MechHybridMamba, "BambaForCausalLM": MechHybridMamba,
	"GraniteMoeHybridForCausalLM": MechHybridMamba, "Plamo2ForCausalLM": MechHybridMamba,
	"Qwen3NextForCausalLM": MechLinearAttn, "KimiLinearForCausalLM": MechLinearAttn,
	"MiniMaxText01ForCausalLM": MechLinearAttn, "MiniMaxM1ForCausalLM": MechLinearAttn,
	"RWKV5ForCausalLM": MechLinearAttn, "RWKV6ForCausalLM": MechLinearAttn, "Lfm2ForCausalLM": MechHybridMamba,
	"T5ForConditionalGeneration": MechEncoderDec, "BartForConditionalGeneration": MechEncoderDec,
	"WhisperForConditionalGeneration": MechEncoderDec, "MllamaForConditionalGeneration": MechEncoderDec,
	// vLLM registers these as embedding models (_EMBEDDING_MODELS in
	// vllm/model_executor/models/registry.py at
	// 0002bff0b6cb36a3c8a17364de3303664463c412), not as encoder-decoders.
	"BertModel": MechPooling, "RobertaModel": MechPooling, "XLMRobertaModel": MechPooling,
}

// registryNotes say what vLLM's own registry (registry.py at
// 0002bff0b6cb36a3c8a17364de3303664463c412) does with an architecture the
// calculator does not implement, where that is more than "not modelled".
var registryNotes = map[string]string{
	"T5ForConditionalGeneration":     "vLLM's model registry does not list it, so vLLM refuses it too",
	"RWKV5ForCausalLM":               "vLLM's model registry does not list it, so vLLM refuses it too",
	"RWKV6ForCausalLM":               "vLLM's model registry does not list it, so vLLM refuses it too",
	"BartForConditionalGeneration":   "vLLM lists it under _PREVIOUSLY_SUPPORTED_MODELS: removed in 0.10.2",
	"MllamaForConditionalGeneration": "vLLM lists it under _PREVIOUSLY_SUPPORTED_MODELS: removed in 0.10.2",
}

// families is the dispatch table: architecture name → family. Every
// entry has sharding rules in the engine facts under the same name.
var families = map[string]family{
	"LlamaForCausalLM":      {"llama", denseAttention, "dense"},
	"MistralForCausalLM":    {"llama", denseAttention, "dense"},
	"Qwen2ForCausalLM":      {"llama", denseAttention, "dense"},
	"Qwen3ForCausalLM":      {"llama", denseAttention, "dense"},
	"Qwen3MoeForCausalLM":   {"qwen3_moe", denseAttention, "moe"},
	"MixtralForCausalLM":    {"mixtral", denseAttention, "moe"},
	"DeepseekV2ForCausalLM": {"deepseek_v2", mlaAttention, "moe"},
	"DeepseekV3ForCausalLM": {"deepseek_v2", mlaAttention, "moe"},
	"Gemma2ForCausalLM":     {"gemma2", gemma2Attention, "dense"},
	"GptOssForCausalLM":     {"gpt_oss", layerTypesAttention, "moe"},
}

// multimodalWrappers are wrappers whose language model is described by
// text_config; the calculator dispatches on the text model and marks the
// artifact multimodal (its vision tower has no sharding rules yet).
var multimodalWrappers = map[string]bool{
	"Mistral3ForConditionalGeneration": true, "LlavaForConditionalGeneration": true,
	"Gemma3ForConditionalGeneration": true,
}

// textArchByModelType maps a text_config model_type to the architecture
// name its family is registered under.
var textArchByModelType = map[string]string{
	"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
	"qwen3": "Qwen3ForCausalLM",
}

// ParseArch reads the architecture facts from config.json. An error is a
// config that cannot be read (not JSON, a field of the wrong type, a
// required field missing for a dispatched family); an architecture the
// calculator does not implement is not an error: it comes back with
// Mechanism unknown (or the named unimplemented mechanism) and a reason.
func ParseArch(config []byte) (ArchFacts, error) {
	top, err := parseCfg(config, "config.json")
	if err != nil {
		return ArchFacts{}, err
	}
	a, err := archNames(top)
	if err != nil {
		return ArchFacts{}, err
	}
	if m, ok := notImplemented[a.Architecture]; ok {
		a.Mechanism, a.UnknownReason = m, fmt.Sprintf("mechanism %s (%s) is not implemented by the calculator", m, a.Architecture)
		if note := registryNotes[a.Architecture]; note != "" {
			a.UnknownReason += "; " + note
		}
		return a, nil
	}
	c := top
	arch := a.Architecture
	if multimodalWrappers[arch] {
		a.Multimodal = true
		if c, err = top.sub("text_config"); err != nil {
			return ArchFacts{}, err
		}
		mt, err := c.str("model_type")
		if err != nil {
			return ArchFacts{}, err
		}
		if arch = textArchByModelType[mt]; arch == "" {
			a.Mechanism, a.UnknownReason = MechUnknown, fmt.Sprintf("text model type %q of %s is not in the calculator's dispatch table", mt, a.Architecture)
			return a, nil
		}
	}
	fam, ok := families[arch]
	if !ok {
		a.Mechanism, a.UnknownReason = MechUnknown, fmt.Sprintf("architecture %s is not in the calculator's dispatch table", a.Architecture)
		return a, nil
	}
	a.Family, a.FFN = fam.name, fam.ffn
	if err := fam.facts(c, top, &a); err != nil {
		return ArchFacts{}, err
	}
	return a, nil
}

// archNames reads what the calculator dispatches on: the first of
// architectures, and model_type.
func archNames(top cfg) (ArchFacts, error) {
	var a ArchFacts
	archs, err := top.strings("architectures")
	if err != nil {
		return ArchFacts{}, err
	}
	if len(archs) == 0 {
		return ArchFacts{}, fmt.Errorf("config.json: architectures is missing or empty; the calculator dispatches on it")
	}
	a.Architecture = archs[0]
	if a.ModelType, err = top.str("model_type"); err != nil {
		return ArchFacts{}, err
	}
	return a, nil
}

// facts reads the fields of a dispatched family: the common sizes, its
// attention mechanism, MoE and quantization facts. c is the text model's
// config, top the whole config.
func (fam family) facts(c, top cfg, a *ArchFacts) error {
	if err := common(c, top, a); err != nil {
		return err
	}
	if err := fam.mechanism(c, a); err != nil {
		return err
	}
	if fam.ffn == "moe" {
		if err := moeFacts(c, a); err != nil {
			return err
		}
	}
	return quantFacts(top, c, a)
}

// common reads the fields every dispatched family has. top is the whole
// config (tie_word_embeddings and torch_dtype may live there for wrappers).
func common(c, top cfg, a *ArchFacts) error {
	if err := commonSizes(c, a); err != nil {
		return err
	}
	if err := headDims(c, a); err != nil {
		return err
	}
	if err := inheritedFields(c, top, a); err != nil {
		return err
	}
	a.LayerKinds = make([]LayerKind, a.NumLayers)
	for i := range a.LayerKinds {
		a.LayerKinds[i] = LayerFull
	}
	return nil
}

// commonSizes reads the required dimensions and the KV head count (absent
// or zero for MHA, where it equals the attention head count).
func commonSizes(c cfg, a *ArchFacts) error {
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{
		{"hidden_size", &a.HiddenSize}, {"num_hidden_layers", &a.NumLayers},
		{"num_attention_heads", &a.NumHeads}, {"vocab_size", &a.VocabSize},
		{"max_position_embeddings", &a.MaxPosition},
	} {
		if *f.dst, err = c.requiredPositive(f.name); err != nil {
			return err
		}
	}
	if a.IntermediateSize, _, err = c.integer("intermediate_size"); err != nil {
		return err
	}
	kv, ok, err := c.integer("num_key_value_heads")
	if err != nil {
		return err
	}
	if !ok || kv == 0 {
		kv = a.NumHeads // MHA: the config omits the KV head count
	}
	a.NumKVHeads = kv
	return nil
}

// headDims reads head_dim (else hidden_size / heads) and the rotary share.
func headDims(c cfg, a *ArchFacts) error {
	hd, ok, err := c.integer("head_dim")
	if err != nil {
		return err
	}
	if !ok || hd == 0 {
		if a.HiddenSize%a.NumHeads != 0 {
			return fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d and head_dim is absent", c.path, a.HiddenSize, a.NumHeads)
		}
		hd = a.HiddenSize / a.NumHeads
	}
	a.HeadDim, a.HeadDimV, a.RotaryDim = hd, hd, hd
	if prf, ok, err := c.number("partial_rotary_factor"); err != nil {
		return err
	} else if ok {
		a.RotaryDim = int64(float64(hd) * prf)
	}
	return nil
}

// inheritedFields reads tie_word_embeddings and torch_dtype from the text
// config, falling back to the top-level config where wrappers put them.
func inheritedFields(c, top cfg, a *ArchFacts) error {
	tie, ok, err := c.boolean("tie_word_embeddings")
	if err != nil {
		return err
	}
	if !ok {
		if tie, _, err = top.boolean("tie_word_embeddings"); err != nil {
			return err
		}
	}
	a.TieWordEmbeddings = tie
	if a.TorchDType, err = c.str("torch_dtype"); err != nil {
		return err
	}
	if a.TorchDType == "" {
		if a.TorchDType, err = top.str("torch_dtype"); err != nil {
			return err
		}
	}
	return nil
}

// denseAttention: MHA/GQA/MQA on every layer, or sliding on every layer
// when the config enables a window (Mistral v0.1; Qwen2 only with
// use_sliding_window, which vLLM honours per max_window_layers — not
// modelled, so unknown).
func denseAttention(c cfg, a *ArchFacts) error {
	a.Mechanism = MechDense
	sw, ok, err := c.integer("sliding_window")
	if err != nil || !ok || sw == 0 {
		return err
	}
	use, hasUse, err := c.boolean("use_sliding_window")
	if err != nil {
		return err
	}
	if hasUse && !use {
		return nil
	}
	if hasUse {
		a.Mechanism, a.UnknownReason = MechUnknown, "use_sliding_window with max_window_layers is not modelled"
		return nil
	}
	a.SlidingWindow = sw
	a.Mechanism = MechSlidingWindow
	for i := range a.LayerKinds {
		a.LayerKinds[i] = LayerSliding
	}
	return nil
}

// gemma2Attention: sliding window on even layers, full on odd ones
// (vLLM gemma2.py: is_sliding = not bool(layer_idx % 2)), or as
// layer_types says when the config carries it.
func gemma2Attention(c cfg, a *ArchFacts) error {
	sw, err := c.requiredPositive("sliding_window")
	if err != nil {
		return err
	}
	a.SlidingWindow = sw
	types, err := c.strings("layer_types")
	if err != nil {
		return err
	}
	if len(types) == 0 {
		for i := range a.LayerKinds {
			if i%2 == 0 {
				a.LayerKinds[i] = LayerSliding
			}
		}
		a.Mechanism = MechHybridSliding
		return nil
	}
	return applyLayerTypes(c, a, types)
}

// layerTypesAttention: the config's layer_types list decides each layer
// (gpt-oss alternates sliding_attention and full_attention).
func layerTypesAttention(c cfg, a *ArchFacts) error {
	types, err := c.strings("layer_types")
	if err != nil {
		return err
	}
	if len(types) == 0 {
		return fmt.Errorf("%s: layer_types is missing; %s needs it to tell sliding from full layers", c.path, a.Architecture)
	}
	sw, err := c.requiredPositive("sliding_window")
	if err != nil {
		return err
	}
	a.SlidingWindow = sw
	return applyLayerTypes(c, a, types)
}

func applyLayerTypes(c cfg, a *ArchFacts, types []string) error {
	if int64(len(types)) != a.NumLayers {
		return fmt.Errorf("%s: layer_types has %d entries for %d layers", c.path, len(types), a.NumLayers)
	}
	for i, t := range types {
		switch t {
		case "full_attention":
			a.LayerKinds[i] = LayerFull
		case "sliding_attention":
			a.LayerKinds[i] = LayerSliding
		default:
			a.Mechanism, a.UnknownReason = MechUnknown, fmt.Sprintf("layer type %q (layer %d) is not implemented", t, i)
			return nil
		}
	}
	switch {
	case !slices.Contains(a.LayerKinds, LayerSliding):
		a.Mechanism, a.SlidingWindow = MechDense, 0
	case !slices.Contains(a.LayerKinds, LayerFull):
		a.Mechanism = MechSlidingWindow
	default:
		a.Mechanism = MechHybridSliding
	}
	return nil
}

// mlaAttention: DeepSeek-V2/V3 latent attention.
func mlaAttention(c cfg, a *ArchFacts) error {
	m := &MLAFacts{}
	var err error
	if m.KVLoraRank, err = c.requiredPositive("kv_lora_rank"); err != nil {
		return err
	}
	if m.QKRopeHeadDim, err = c.requiredPositive("qk_rope_head_dim"); err != nil {
		return err
	}
	if m.QKNopeHeadDim, err = c.requiredPositive("qk_nope_head_dim"); err != nil {
		return err
	}
	if m.VHeadDim, err = c.requiredPositive("v_head_dim"); err != nil {
		return err
	}
	if m.QLoraRank, _, err = c.integer("q_lora_rank"); err != nil {
		return err
	}
	a.MLA, a.Mechanism = m, MechMLA
	a.HeadDim, a.HeadDimV, a.RotaryDim = m.QKNopeHeadDim+m.QKRopeHeadDim, m.VHeadDim, m.QKRopeHeadDim
	return nil
}

// moeFacts reads the expert counts under the names the families use.
func moeFacts(c cfg, a *ArchFacts) error {
	m := &MoEFacts{}
	var err error
	for _, name := range []string{"num_experts", "num_local_experts", "n_routed_experts"} {
		n, ok, err := c.integer(name)
		if err != nil {
			return err
		}
		if ok && n > 0 {
			m.NumExperts = n
			break
		}
	}
	if m.NumExperts == 0 {
		return fmt.Errorf("%s: %s is a mixture-of-experts model but none of num_experts, num_local_experts, n_routed_experts is set", c.path, a.Architecture)
	}
	if m.TopK, err = c.requiredPositive("num_experts_per_tok"); err != nil {
		return err
	}
	if m.ExpertIntermediate, _, err = c.integer("moe_intermediate_size"); err != nil {
		return err
	}
	if m.ExpertIntermediate == 0 {
		m.ExpertIntermediate = a.IntermediateSize // Mixtral, gpt-oss: experts use intermediate_size
	}
	if m.NumSharedExperts, _, err = c.integer("n_shared_experts"); err != nil {
		return err
	}
	if m.FirstKDenseReplace, _, err = c.integer("first_k_dense_replace"); err != nil {
		return err
	}
	if m.SharedExpertIntermed, _, err = c.integer("shared_expert_intermediate_size"); err != nil {
		return err
	}
	a.MoE = m
	return nil
}

func quantFacts(top, c cfg, a *ArchFacts) error {
	q, ok, err := top.optSub("quantization_config")
	if err != nil {
		return err
	}
	if !ok {
		if q, ok, err = c.optSub("quantization_config"); err != nil || !ok {
			return err
		}
	}
	if a.Quant.Method, err = q.str("quant_method"); err != nil {
		return err
	}
	if a.Quant.Method == "" {
		return fmt.Errorf("%s: quant_method is missing", q.path)
	}
	a.Quant.Format, err = q.str("format")
	return err
}

// cfg is one JSON object of config.json with its path for error messages.
type cfg struct {
	path string
	m    map[string]json.RawMessage
}

func parseCfg(b []byte, path string) (cfg, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return cfg{}, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	if dec.More() {
		return cfg{}, fmt.Errorf("%s: trailing data after the JSON object", path)
	}
	if m == nil {
		return cfg{}, fmt.Errorf("%s: null, not a JSON object", path)
	}
	return cfg{path: path, m: m}, nil
}

func (c cfg) raw(name string) (json.RawMessage, bool) {
	r, ok := c.m[name]
	r = bytes.TrimSpace(r)
	if !ok || len(r) == 0 || string(r) == "null" {
		return nil, false
	}
	return r, true
}

func (c cfg) typeErr(name, want string, r json.RawMessage) error {
	s := strings.TrimSpace(string(r))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Errorf("%s: field %s: want %s, got %s", c.path, name, want, s)
}

// integer reads an integer field; absent or null is (0, false, nil).
func (c cfg) integer(name string) (int64, bool, error) {
	r, ok := c.raw(name)
	if !ok {
		return 0, false, nil
	}
	var n json.Number
	if c0 := r[0]; c0 != '-' && (c0 < '0' || c0 > '9') {
		return 0, false, c.typeErr(name, "an integer", r)
	}
	if err := json.Unmarshal(r, &n); err != nil {
		return 0, false, c.typeErr(name, "an integer", r)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, false, c.typeErr(name, "an integer", r)
	}
	if v < 0 {
		return 0, false, fmt.Errorf("%s: field %s: %d is negative", c.path, name, v)
	}
	return v, true, nil
}

func (c cfg) requiredPositive(name string) (int64, error) {
	v, ok, err := c.integer(name)
	if err != nil {
		return 0, err
	}
	if !ok || v == 0 {
		return 0, fmt.Errorf("%s: field %s is missing or zero", c.path, name)
	}
	return v, nil
}

func (c cfg) number(name string) (float64, bool, error) {
	r, ok := c.raw(name)
	if !ok {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(r, &f); err != nil {
		return 0, false, c.typeErr(name, "a number", r)
	}
	return f, true, nil
}

func (c cfg) boolean(name string) (bool, bool, error) {
	r, ok := c.raw(name)
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(r, &b); err != nil {
		return false, false, c.typeErr(name, "true or false", r)
	}
	return b, true, nil
}

func (c cfg) str(name string) (string, error) {
	r, ok := c.raw(name)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return "", c.typeErr(name, "a string", r)
	}
	return s, nil
}

func (c cfg) strings(name string) ([]string, error) {
	r, ok := c.raw(name)
	if !ok {
		return nil, nil
	}
	var s []string
	if err := json.Unmarshal(r, &s); err != nil {
		return nil, c.typeErr(name, "a list of strings", r)
	}
	return s, nil
}

func (c cfg) optSub(name string) (cfg, bool, error) {
	r, ok := c.raw(name)
	if !ok {
		return cfg{}, false, nil
	}
	if !bytes.HasPrefix(bytes.TrimSpace(r), []byte("{")) {
		return cfg{}, false, c.typeErr(name, "an object", r)
	}
	s, err := parseCfg(r, c.path+"."+name)
	return s, err == nil, err
}

func (c cfg) sub(name string) (cfg, error) {
	s, ok, err := c.optSub(name)
	if err != nil {
		return cfg{}, err
	}
	if !ok {
		return cfg{}, fmt.Errorf("%s: %s is missing; the multimodal wrapper's language model is described there", c.path, name)
	}
	return s, nil
}
