package quant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// Support is a method adapter's answer.
type Support string

const (
	Supported   Support = "supported"   // recognised: the spec is complete for this checkpoint
	Unsupported Support = "unsupported" // not recognised by this build; Reason says what
	Unknown     Support = "unknown"     // recognised but config and headers do not settle it
)

// Verdict is an adapter's answer with its reasons.
type Verdict struct {
	Support Support
	Reason  string // why, for unsupported and unknown; one line
	// Disagreements between quantization_config and the tensor headers,
	// sorted; the headers win for byte accounting (§2.6.4).
	Disagreements []string
}

// Config is a checkpoint's quantization configuration handed to an
// adapter: where it was found, quant_method verbatim and the canonical
// bytes (adapters decode them into their own typed structs).
type Config struct {
	File      string
	Path      string
	Method    string // quant_method as written; inferred for legacy files without one
	Canonical []byte
	Digest    string
}

// ConfigFrom reads quant_method from an artifact.QuantConfig. Legacy
// files that carry none name their method by file: quantize_config.json
// is AutoGPTQ's, quant_config.json AutoAWQ's, hf_quant_config.json
// ModelOpt's.
func ConfigFrom(q artifact.QuantConfig) (Config, error) {
	var head struct {
		QuantMethod *string `json:"quant_method"`
		Producer    *struct {
			Name string `json:"name"`
		} `json:"producer"`
	}
	if err := json.Unmarshal(q.Canonical, &head); err != nil {
		return Config{}, fmt.Errorf("%s %s: %w", q.File, q.Path, err)
	}
	c := Config{File: q.File, Path: q.Path, Canonical: q.Canonical, Digest: q.Digest}
	switch {
	case head.QuantMethod != nil:
		c.Method = *head.QuantMethod
	case q.File == "quantize_config.json":
		c.Method = "gptq"
	case q.File == "quant_config.json":
		c.Method = "awq"
	case q.File == "hf_quant_config.json":
		c.Method = "modelopt"
	}
	return c, nil
}

// Method is a typed quantization adapter. Adding one needs no schema
// change: every method answers with a QuantizationSpec and a Verdict.
type Method interface {
	Name() string
	// Detect reads cfg (nil for a checkpoint without quantization
	// settings) and the headers. It never fails: what it cannot
	// recognise is Unsupported with a reason.
	Detect(cfg *Config, h artifact.Headers) (QuantizationSpec, Verdict)
}

// aliases are the method names vLLM folds into one implementation
// (vllm/model_executor/layers/quantization: awq_marlin and gptq_marlin are
// kernel choices for awq and gptq checkpoints).
var aliases = map[string]string{
	"auto_awq": "awq", "awq_marlin": "awq", "auto_gptq": "gptq", "gptq_marlin": "gptq",
	"compressed_tensors": "compressed-tensors", "modelopt_fp4": "modelopt",
}

// Canonical method name for dispatch.
func methodKey(m string) string {
	k := strings.ToLower(strings.TrimSpace(m))
	if a, ok := aliases[k]; ok {
		return a
	}
	return k
}

// Methods are narwhal's adapters: native (no quantization), awq, gptq,
// fp8, compressed-tensors, bitsandbytes, mxfp4, modelopt.
func Methods() []Method {
	return []Method{Native{}, AWQ{}, GPTQ{}, FP8{}, CompressedTensors{}, BitsAndBytes{}, MXFP4{}, ModelOpt{}}
}

// Detect dispatches to the adapter named by cfg's quant_method (Native
// when cfg is nil). An unknown method is Unsupported, stated, with the
// verbatim name; no error and no schema change.
func Detect(cfg *Config, h artifact.Headers, methods []Method) (QuantizationSpec, Verdict) {
	want := "native"
	if cfg != nil {
		want = methodKey(cfg.Method)
	}
	for _, m := range methods {
		if m.Name() == want {
			spec, v := m.Detect(cfg, h)
			slices.Sort(v.Disagreements)
			return spec, v
		}
	}
	return unsupported(cfg.Method, fmt.Sprintf("quant_method %q has no adapter in this build (known: %s)", cfg.Method, names(methods)))
}

func names(ms []Method) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return strings.Join(out, ", ")
}

// unsupported is the answer for anything not recognised: the verbatim
// method and "unknown" formats, never a guessed scheme.
func unsupported(method, reason string) (QuantizationSpec, Verdict) {
	return QuantizationSpec{Method: method, WeightFormat: "unknown", BlockShape: []int{}, ExcludedModules: []string{}, Workspaces: []Workspace{}},
		Verdict{Support: Unsupported, Reason: reason}
}

func ptr[T any](v T) *T { return &v }

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// tensors indexes headers by name.
type tensors map[string]artifact.Tensor

func index(h artifact.Headers) tensors {
	x := make(tensors, len(h.Tensors))
	for _, t := range h.Tensors {
		x[t.Name] = t
	}
	return x
}

// bases returns the module names (name minus suffix) of every tensor
// ending in suffix, sorted.
func (x tensors) bases(suffix string) []string {
	var out []string
	for n := range x {
		if strings.HasSuffix(n, suffix) {
			out = append(out, strings.TrimSuffix(n, suffix))
		}
	}
	slices.Sort(out)
	return out
}

func (x tensors) has(suffix string) bool {
	for n := range x {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}

// isExpert reports a routed or shared expert module.
func isExpert(base string) bool {
	return strings.Contains(base, ".experts.") || strings.Contains(base, ".shared_expert")
}

func shapeIs(t artifact.Tensor, dims ...int64) bool {
	return slices.Equal(t.Shape, dims)
}

// disagreement lists, capped so one systematic problem is one line plus a count.
type findings struct {
	lines []string
	more  map[string]int
}

func (f *findings) add(kind, line string) {
	if f.more == nil {
		f.more = map[string]int{}
	}
	if f.more[kind]++; f.more[kind] == 1 {
		f.lines = append(f.lines, line)
	}
}

func (f *findings) list() []string {
	out := slices.Clone(f.lines)
	for i, l := range out {
		for k, n := range f.more {
			if n > 1 && strings.HasPrefix(l, k+":") {
				out[i] = fmt.Sprintf("%s (and %d more like it)", l, n-1)
			}
		}
	}
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}

// verdictOf is Supported unless there are findings that leave the
// byte accounting unsettled.
func verdictOf(f *findings, unsettled bool, reason string) Verdict {
	v := Verdict{Support: Supported, Disagreements: f.list()}
	if unsettled {
		v.Support, v.Reason = Unknown, reason
	}
	return v
}
