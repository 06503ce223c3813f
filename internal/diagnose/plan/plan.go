// Package plan is the typed vLLM launch plan that narwhal diagnose
// corrects and renders (ADR-006 §9, §14; reference/evidence.md §2.12).
//
// Every field a correction can change is an integer, a float, a bool, a
// list of integers or a closed enumeration stored as a small integer.
// The one text value, the model, is a ModelRef: it can be made only from
// the operator's own input (the fleet document or a plan file) and only
// this package can make one. The package does not import the diagnosis
// package, so nothing a log says is even visible here: a rendered
// command consists of flag names from a fixed table, numbers formatted by
// strconv, enumeration names from fixed tables and the operator's model
// reference.
//
// A zero value means "unset": vLLM's default, not on the command line.
package plan

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// Plan is one engine's launch parameters.
type Plan struct {
	Model                 ModelRef     `json:"model"`
	MaxModelLen           int64        `json:"max_model_len"`
	GPUMemoryUtilization  float64      `json:"gpu_memory_utilization"`
	EnforceEager          bool         `json:"enforce_eager"`
	CUDAGraphCaptureSizes []int64      `json:"cudagraph_capture_sizes"` // empty = the version's default list
	MaxCUDAGraphCapture   int64        `json:"max_cudagraph_capture_size"`
	DType                 DType        `json:"dtype"`
	TensorParallelSize    int          `json:"tensor_parallel_size"`
	PipelineParallelSize  int          `json:"pipeline_parallel_size"`
	KVCacheDType          KVCacheDType `json:"kv_cache_dtype"`
	MaxNumSeqs            int64        `json:"max_num_seqs"`
	MaxNumBatchedTokens   int64        `json:"max_num_batched_tokens"`
	Quantization          Quantization `json:"quantization"`
	Port                  int          `json:"port"`
}

// Schema ranges. They bound what a plan may say, whoever wrote it.
const (
	MaxModelLenLimit   = 1 << 30
	MaxParallel        = 1024
	MaxNumSeqsLimit    = 1 << 20
	MaxBatchedLimit    = 1 << 26
	MaxCaptureLimit    = 1 << 16
	MaxCaptureEntries  = 1024
	MaxPort            = 65535
	modelRefMaxLen     = 256
	utilizationEpsilon = 1e-9
)

// Validate checks every field against its range and closed set. Errors
// name the field and the fix.
func (p Plan) Validate() error {
	ints := []struct {
		name  string
		v     int64
		limit int64
	}{
		{"max_model_len", p.MaxModelLen, MaxModelLenLimit},
		{"max_cudagraph_capture_size", p.MaxCUDAGraphCapture, MaxCaptureLimit},
		{"tensor_parallel_size", int64(p.TensorParallelSize), MaxParallel},
		{"pipeline_parallel_size", int64(p.PipelineParallelSize), MaxParallel},
		{"max_num_seqs", p.MaxNumSeqs, MaxNumSeqsLimit},
		{"max_num_batched_tokens", p.MaxNumBatchedTokens, MaxBatchedLimit},
		{"port", int64(p.Port), MaxPort},
	}
	for _, f := range ints {
		if f.v < 0 || f.v > f.limit {
			return fmt.Errorf("plan: %s %d: want 0 (unset) or 1..%d", f.name, f.v, f.limit)
		}
	}
	if u := p.GPUMemoryUtilization; math.IsNaN(u) || u < 0 || u > 1 {
		return fmt.Errorf("plan: gpu_memory_utilization %v: want 0 (unset) or a fraction in (0, 1]", u)
	}
	if err := validCaptureSizes(p.CUDAGraphCaptureSizes); err != nil {
		return err
	}
	switch {
	case !p.DType.Valid():
		return fmt.Errorf("plan: dtype %d is not in the closed set", p.DType)
	case !p.KVCacheDType.Valid():
		return fmt.Errorf("plan: kv_cache_dtype %d is not in the closed set", p.KVCacheDType)
	case !p.Quantization.Valid():
		return fmt.Errorf("plan: quantization %d is not in the closed set", p.Quantization)
	}
	return p.Model.validate()
}

// validCaptureSizes: an empty list is unset (canonical JSON writes a nil
// list as []), so the version's default list applies.
func validCaptureSizes(s []int64) error {
	if len(s) > MaxCaptureEntries {
		return fmt.Errorf("plan: cudagraph_capture_sizes has %d entries: want at most %d (or [] for the default list)", len(s), MaxCaptureEntries)
	}
	for i, v := range s {
		if v < 1 || v > MaxCaptureLimit || i > 0 && v <= s[i-1] {
			return fmt.Errorf("plan: cudagraph_capture_sizes[%d] %d: want strictly increasing sizes in 1..%d", i, v, MaxCaptureLimit)
		}
	}
	return nil
}

// Clone returns a deep copy (the capture list is not shared).
func (p Plan) Clone() Plan {
	q := p.CUDAGraphCaptureSizes
	p.CUDAGraphCaptureSizes = nil
	if len(q) > 0 {
		p.CUDAGraphCaptureSizes = slices.Clone(q)
	}
	return p
}

// Launch is the plan as the memory calculator's launch configuration.
// Zero values stay zero (the calculator fills the version's defaults).
func (p Plan) Launch() memory.LaunchConfig {
	l := memory.LaunchConfig{
		TP: p.TensorParallelSize, PP: p.PipelineParallelSize, MaxModelLen: p.MaxModelLen,
		MaxNumSeqs: p.MaxNumSeqs, MaxNumBatchedTokens: p.MaxNumBatchedTokens,
		GPUMemoryUtilization: p.GPUMemoryUtilization, EnforceEager: p.EnforceEager,
	}
	if len(p.CUDAGraphCaptureSizes) > 0 {
		l.CUDAGraphCaptureSizes = slices.Clone(p.CUDAGraphCaptureSizes)
	}
	if p.KVCacheDType != KVCacheUnset {
		l.KVCacheDType = p.KVCacheDType.String()
	}
	if p.DType != DTypeUnset {
		l.DType = p.DType.String()
		if p.DType == DTypeHalf {
			l.DType = "float16"
		}
	}
	if p.Quantization != QuantUnset {
		l.Quantization = p.Quantization.String()
	}
	return l
}

// ModelSource says which operator input a model reference came from.
type ModelSource uint8

// Model sources.
const (
	ModelNone         ModelSource = iota // no model named: argv cannot be rendered
	ModelFromFleetDoc                    // the fleet document's model
	ModelFromPlanFile                    // a plan file (--plan) or a stored plan the diagnosis wrote
)

var sourceNames = enumNames{"", "fleet", "plan_file"}

func (s ModelSource) String() string { return sourceNames.name(uint8(s), "model source") }

// ModelRef names the model a plan serves. Its fields are unexported: only
// this package makes one, from the fleet document or a plan file — never
// from a log. The name is checked against a conservative character set
// (an HF repository id or a file path) so that a rendered command stays
// inside the closed set of characters.
type ModelRef struct {
	name   string
	source ModelSource
}

var modelRE = regexp.MustCompile(`^(?:/|\./)?[A-Za-z0-9_][A-Za-z0-9._/+=@:-]*$`)

func newModelRef(name string, src ModelSource) (ModelRef, error) {
	if len(name) == 0 || len(name) > modelRefMaxLen || !modelRE.MatchString(name) || strings.Contains(name, "..") {
		return ModelRef{}, fmt.Errorf("model %q: a plan renders only HF ids or paths of letters, digits and . _ / + = @ : - (at most %d, no '..'); use a symlink or rename the directory", name, modelRefMaxLen)
	}
	return ModelRef{name: name, source: src}, nil
}

// IsSet reports whether the reference names a model.
func (m ModelRef) IsSet() bool { return m.source != ModelNone }

// Name is the model as the operator wrote it ("" when unset).
func (m ModelRef) Name() string { return m.name }

// Source is where the reference came from.
func (m ModelRef) Source() ModelSource { return m.source }

func (m ModelRef) validate() error {
	if !m.IsSet() {
		return nil
	}
	if !sourceNames.valid(uint8(m.source)) {
		return fmt.Errorf("plan: model source %d is not in the closed set", m.source)
	}
	_, err := newModelRef(m.name, m.source)
	return err
}

type modelJSON struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// MarshalJSON writes {"name", "source"}, or null when unset.
func (m ModelRef) MarshalJSON() ([]byte, error) {
	if !m.IsSet() {
		return []byte("null"), nil
	}
	return json.Marshal(modelJSON{Name: m.name, Source: m.source.String()})
}

// UnmarshalJSON reads a stored or hand-written plan; the name is checked
// as for every other model reference. A bare string is a plan file's
// model; an object is a stored plan (its source kept).
func (m *ModelRef) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = ModelRef{}
		return nil
	}
	var j modelJSON
	if err := json.Unmarshal(b, &j.Name); err != nil {
		if err := strictUnmarshal(b, &j); err != nil {
			return fmt.Errorf("model: want a string or {\"name\", \"source\"}: %w", err)
		}
	}
	src := ModelFromPlanFile
	if j.Source != "" {
		v, ok := sourceNames.parse(j.Source, nil)
		if !ok || v == 0 {
			return fmt.Errorf("model source %q: want fleet or plan_file", j.Source)
		}
		src = ModelSource(v)
	}
	r, err := newModelRef(j.Name, src)
	*m = r
	return err
}
