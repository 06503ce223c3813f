package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/launch"
)

// Field names one plan field. The set is closed; its names are the
// record's field paths and its flags are the only flags a plan renders.
type Field uint8

// Plan fields, in the order a command line renders them.
const (
	FieldModel Field = iota
	FieldPort
	FieldTensorParallelSize
	FieldPipelineParallelSize
	FieldDType
	FieldQuantization
	FieldKVCacheDType
	FieldMaxModelLen
	FieldGPUMemoryUtilization
	FieldMaxNumSeqs
	FieldMaxNumBatchedTokens
	FieldEnforceEager
	FieldCUDAGraphCaptureSizes
	FieldMaxCUDAGraphCapture
	fieldCount
)

var fieldNames = [fieldCount]struct{ path, flag string }{
	FieldModel:                 {"model", ""},
	FieldPort:                  {"port", "--port"},
	FieldTensorParallelSize:    {"tensor_parallel_size", "--tensor-parallel-size"},
	FieldPipelineParallelSize:  {"pipeline_parallel_size", "--pipeline-parallel-size"},
	FieldDType:                 {"dtype", "--dtype"},
	FieldQuantization:          {"quantization", "--quantization"},
	FieldKVCacheDType:          {"kv_cache_dtype", "--kv-cache-dtype"},
	FieldMaxModelLen:           {"max_model_len", "--max-model-len"},
	FieldGPUMemoryUtilization:  {"gpu_memory_utilization", "--gpu-memory-utilization"},
	FieldMaxNumSeqs:            {"max_num_seqs", "--max-num-seqs"},
	FieldMaxNumBatchedTokens:   {"max_num_batched_tokens", "--max-num-batched-tokens"},
	FieldEnforceEager:          {"enforce_eager", "--enforce-eager"},
	FieldCUDAGraphCaptureSizes: {"cudagraph_capture_sizes", "--compilation-config"},
	FieldMaxCUDAGraphCapture:   {"max_cudagraph_capture_size", "--compilation-config"},
}

// Fields lists every field in render order.
func Fields() []Field {
	out := make([]Field, fieldCount)
	for i := range out {
		out[i] = Field(i)
	}
	return out
}

// Path is the field's name in records and diffs ("max_model_len").
func (f Field) Path() string {
	if f >= fieldCount {
		return fmt.Sprintf("<invalid field %d>", f)
	}
	return fieldNames[f].path
}

// Flag is the vllm serve flag that carries the field ("" for the model,
// which is positional).
func (f Field) Flag() string {
	if f >= fieldCount {
		return ""
	}
	return fieldNames[f].flag
}

func (f Field) String() string { return f.Path() }

// MarshalJSON writes the path.
func (f Field) MarshalJSON() ([]byte, error) {
	if f >= fieldCount {
		return nil, fmt.Errorf("field %d is not in the closed set", f)
	}
	return json.Marshal(f.Path())
}

// UnmarshalJSON reads a path.
func (f *Field) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for i, n := range fieldNames {
		if n.path == s {
			*f = Field(i)
			return nil
		}
	}
	return fmt.Errorf("plan field %q is not in the closed set", s)
}

// ValueKind says which member of a Value is set.
type ValueKind uint8

// Value kinds.
const (
	KindUnset ValueKind = iota
	KindInt
	KindFloat
	KindBool
	KindEnum
	KindInts
	KindModel
)

// Value is one field's value in a diff: typed, never free text. Enum holds
// a name from one of this package's tables; Model the operator's model
// reference.
type Value struct {
	Kind  ValueKind
	Int   int64
	Float float64
	Bool  bool
	Enum  string
	Ints  []int64
	Model ModelRef
}

// Get returns field f of p as a Value (unset for a zero value).
func (p Plan) Get(f Field) Value {
	i := func(v int64) Value {
		if v == 0 {
			return Value{}
		}
		return Value{Kind: KindInt, Int: v}
	}
	e := func(set bool, name string) Value {
		if !set {
			return Value{}
		}
		return Value{Kind: KindEnum, Enum: name}
	}
	switch f {
	case FieldModel:
		if !p.Model.IsSet() {
			return Value{}
		}
		return Value{Kind: KindModel, Model: p.Model}
	case FieldPort:
		return i(int64(p.Port))
	case FieldTensorParallelSize:
		return i(int64(p.TensorParallelSize))
	case FieldPipelineParallelSize:
		return i(int64(p.PipelineParallelSize))
	case FieldDType:
		return e(p.DType != DTypeUnset, p.DType.String())
	case FieldQuantization:
		return e(p.Quantization != QuantUnset, p.Quantization.String())
	case FieldKVCacheDType:
		return e(p.KVCacheDType != KVCacheUnset, p.KVCacheDType.String())
	case FieldMaxModelLen:
		return i(p.MaxModelLen)
	case FieldGPUMemoryUtilization:
		if p.GPUMemoryUtilization == 0 {
			return Value{}
		}
		return Value{Kind: KindFloat, Float: p.GPUMemoryUtilization}
	case FieldMaxNumSeqs:
		return i(p.MaxNumSeqs)
	case FieldMaxNumBatchedTokens:
		return i(p.MaxNumBatchedTokens)
	case FieldEnforceEager:
		if !p.EnforceEager {
			return Value{}
		}
		return Value{Kind: KindBool, Bool: true}
	case FieldCUDAGraphCaptureSizes:
		if len(p.CUDAGraphCaptureSizes) == 0 {
			return Value{}
		}
		return Value{Kind: KindInts, Ints: slices.Clone(p.CUDAGraphCaptureSizes)}
	case FieldMaxCUDAGraphCapture:
		return i(p.MaxCUDAGraphCapture)
	}
	return Value{}
}

// Equal reports whether two values are the same.
func (v Value) Equal(w Value) bool {
	return v.Kind == w.Kind && v.Int == w.Int && v.Float == w.Float && v.Bool == w.Bool && v.Enum == w.Enum &&
		slices.Equal(v.Ints, w.Ints) && v.Model == w.Model
}

// String renders the value for a diff or a command line.
func (v Value) String() string {
	switch v.Kind {
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		return strconv.FormatFloat(v.Float, 'f', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.Bool)
	case KindEnum:
		return v.Enum
	case KindInts:
		parts := make([]string, len(v.Ints))
		for i, n := range v.Ints {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case KindModel:
		return v.Model.Name()
	}
	return "unset"
}

// MarshalJSON writes the value as plain typed JSON: a number, a bool, an
// enum name, a list, the model name, or null when unset.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.Kind {
	case KindInt:
		return json.Marshal(v.Int)
	case KindFloat:
		return json.Marshal(v.Float)
	case KindBool:
		return json.Marshal(v.Bool)
	case KindEnum:
		return json.Marshal(v.Enum)
	case KindInts:
		return json.Marshal(v.Ints)
	case KindModel:
		return json.Marshal(v.Model.Name())
	}
	return []byte("null"), nil
}

// Change is one field a correction changes.
type Change struct {
	Field Field `json:"path"`
	From  Value `json:"from"`
	To    Value `json:"to"`
}

func (c Change) String() string {
	return c.Field.Path() + ": " + c.From.String() + " -> " + c.To.String()
}

// Diff lists the fields whose values differ, in field order (which is
// also the order of their paths' first appearance on a command line).
func Diff(from, to Plan) []Change {
	out := []Change{}
	for _, f := range Fields() {
		a, b := from.Get(f), to.Get(f)
		if !a.Equal(b) {
			out = append(out, Change{Field: f, From: a, To: b})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int { return strings.Compare(a.Field.Path(), b.Field.Path()) })
	return out
}

// Apply returns p with each change's To value set. A change whose From
// does not match p is an error: the diff belongs to another plan.
func Apply(p Plan, changes []Change) (Plan, error) {
	q := p.Clone()
	for _, c := range changes {
		if !q.Get(c.Field).Equal(c.From) {
			return Plan{}, fmt.Errorf("plan: %s is %s, the change expects %s", c.Field.Path(), q.Get(c.Field), c.From)
		}
		if err := q.set(c.Field, c.To); err != nil {
			return Plan{}, err
		}
	}
	return q, q.Validate()
}

func (p *Plan) set(f Field, v Value) error {
	switch f {
	case FieldPort:
		p.Port = int(v.Int)
	case FieldTensorParallelSize:
		p.TensorParallelSize = int(v.Int)
	case FieldPipelineParallelSize:
		p.PipelineParallelSize = int(v.Int)
	case FieldMaxModelLen:
		p.MaxModelLen = v.Int
	case FieldMaxNumSeqs:
		p.MaxNumSeqs = v.Int
	case FieldMaxNumBatchedTokens:
		p.MaxNumBatchedTokens = v.Int
	case FieldMaxCUDAGraphCapture:
		p.MaxCUDAGraphCapture = v.Int
	case FieldGPUMemoryUtilization:
		p.GPUMemoryUtilization = v.Float
	case FieldEnforceEager:
		p.EnforceEager = v.Bool
	case FieldCUDAGraphCaptureSizes:
		p.CUDAGraphCaptureSizes = nil
		if len(v.Ints) > 0 {
			p.CUDAGraphCaptureSizes = slices.Clone(v.Ints)
		}
	case FieldDType:
		d, ok := ParseDType(v.Enum)
		if !ok {
			return fmt.Errorf("plan: dtype %q is not in the closed set", v.Enum)
		}
		p.DType = d
	case FieldQuantization:
		q, ok := ParseQuantization(v.Enum)
		if !ok {
			return fmt.Errorf("plan: quantization %q is not in the closed set", v.Enum)
		}
		p.Quantization = q
	case FieldKVCacheDType:
		k, ok := ParseKVCacheDType(v.Enum)
		if !ok {
			return fmt.Errorf("plan: kv_cache_dtype %q is not in the closed set", v.Enum)
		}
		p.KVCacheDType = k
	default:
		return fmt.Errorf("plan: %s cannot be changed by a correction", f.Path())
	}
	return nil
}

// Args renders `vllm serve MODEL --flag value …` from the typed fields:
// the model from the operator's reference, then each set field's flag
// (from the fixed table) and value (strconv, or an enum's table name).
// Flags the plan does not model are not rendered; apply the diff to the
// rest of the launch.
func (p Plan) Args() ([]string, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !p.Model.IsSet() {
		return nil, fmt.Errorf("plan: no model reference to render (give the fleet document with --fleet or a plan file with --plan); the diff still applies")
	}
	argv := []string{"vllm", "serve", p.Model.Name()}
	for _, f := range Fields()[1:] {
		v := p.Get(f)
		switch {
		case v.Kind == KindUnset, f == FieldCUDAGraphCaptureSizes, f == FieldMaxCUDAGraphCapture:
		case v.Kind == KindBool:
			argv = append(argv, f.Flag())
		default:
			argv = append(argv, f.Flag(), v.String())
		}
	}
	if cc := p.compilationConfig(); cc != "" {
		argv = append(argv, "--compilation-config", cc)
	}
	return argv, nil
}

// compilationConfig is the JSON object carrying the capture sizes, built
// from integers ("" when neither is set). vLLM reads cudagraph_capture_sizes
// since 0.8 and max_cudagraph_capture_size since 0.11.
func (p Plan) compilationConfig() string {
	var parts []string
	if s := p.Get(FieldCUDAGraphCaptureSizes); s.Kind == KindInts {
		parts = append(parts, `"cudagraph_capture_sizes":`+s.String())
	}
	if m := p.Get(FieldMaxCUDAGraphCapture); m.Kind == KindInt {
		parts = append(parts, `"max_cudagraph_capture_size":`+m.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Command is Args as one POSIX shell line, every word quoted as needed.
func (p Plan) Command() (string, error) {
	argv, err := p.Args()
	if err != nil {
		return "", err
	}
	return launch.Join(argv), nil
}

// kindOf is the value kind a field holds when set.
func kindOf(f Field) ValueKind {
	switch f {
	case FieldModel:
		return KindModel
	case FieldGPUMemoryUtilization:
		return KindFloat
	case FieldEnforceEager:
		return KindBool
	case FieldDType, FieldQuantization, FieldKVCacheDType:
		return KindEnum
	case FieldCUDAGraphCaptureSizes:
		return KindInts
	}
	return KindInt
}

// decodeValue reads a stored value of field f, checking an enum name
// against the field's closed set.
func decodeValue(f Field, b []byte) (Value, error) {
	if string(b) == "null" {
		return Value{}, nil
	}
	v := Value{Kind: kindOf(f)}
	var err error
	switch v.Kind {
	case KindModel:
		err = v.Model.UnmarshalJSON(b)
	case KindFloat:
		err = json.Unmarshal(b, &v.Float)
	case KindBool:
		err = json.Unmarshal(b, &v.Bool)
	case KindInts:
		err = json.Unmarshal(b, &v.Ints)
	case KindInt:
		err = json.Unmarshal(b, &v.Int)
	case KindEnum:
		if err = json.Unmarshal(b, &v.Enum); err == nil {
			var p Plan
			err = p.set(f, v)
		}
	}
	if err != nil {
		return Value{}, fmt.Errorf("plan change %s: %w", f.Path(), err)
	}
	return v, nil
}

// UnmarshalJSON reads a stored change; values are typed by the field.
func (c *Change) UnmarshalJSON(b []byte) error {
	var raw struct {
		Path Field           `json:"path"`
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	}
	if err := strictUnmarshal(b, &raw); err != nil {
		return err
	}
	from, err := decodeValue(raw.Path, raw.From)
	if err != nil {
		return err
	}
	to, err := decodeValue(raw.Path, raw.To)
	if err != nil {
		return err
	}
	*c = Change{Field: raw.Path, From: from, To: to}
	return nil
}
