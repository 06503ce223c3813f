package plan

import (
	"encoding/json"
	"fmt"
)

// The plan's enumerations are small integers, not strings: a value read
// from a log cannot become one by conversion, only by a switch over the
// constants, and rendering writes the name from the table below — never
// text that came from outside. A zero value is "unset" (vLLM's default,
// not on the command line).

// enumNames is the rendered spelling of each member, index = value.
type enumNames []string

func (n enumNames) name(v uint8, what string) string {
	if int(v) < len(n) {
		return n[v]
	}
	return fmt.Sprintf("<invalid %s %d>", what, v)
}

func (n enumNames) valid(v uint8) bool { return int(v) < len(n) }

// parse maps a spelling (or an alias) onto a member; "" is unset.
func (n enumNames) parse(s string, aliases map[string]uint8) (uint8, bool) {
	for i, m := range n {
		if s == m {
			return uint8(i), true
		}
	}
	v, ok := aliases[s]
	return v, ok
}

func (n enumNames) marshal(v uint8, what string) ([]byte, error) {
	if !n.valid(v) {
		return nil, fmt.Errorf("%s %d is not in the closed set", what, v)
	}
	if v == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(n[v])
}

func (n enumNames) unmarshal(b []byte, aliases map[string]uint8, what string) (uint8, error) {
	if string(b) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	v, ok := n.parse(s, aliases)
	if !ok {
		return 0, fmt.Errorf("%s %q: want one of %v", what, s, n[1:])
	}
	return v, nil
}

// DType is vLLM's --dtype.
type DType uint8

// Model data types.
const (
	DTypeUnset DType = iota
	DTypeAuto
	DTypeHalf // float16
	DTypeBFloat16
	DTypeFloat32
)

var dtypeNames = enumNames{"", "auto", "half", "bfloat16", "float32"}
var dtypeAliases = map[string]uint8{"float16": uint8(DTypeHalf), "fp16": uint8(DTypeHalf), "float": uint8(DTypeFloat32), "bf16": uint8(DTypeBFloat16)}

func (d DType) String() string { return dtypeNames.name(uint8(d), "dtype") }

// Valid reports whether d is a member of the closed set.
func (d DType) Valid() bool { return dtypeNames.valid(uint8(d)) }

// ParseDType reads an operator's spelling (plan file, fleet contract).
func ParseDType(s string) (DType, bool) {
	v, ok := dtypeNames.parse(s, dtypeAliases)
	return DType(v), ok
}

// MarshalJSON writes the name (null when unset).
func (d DType) MarshalJSON() ([]byte, error) { return dtypeNames.marshal(uint8(d), "dtype") }

// UnmarshalJSON refuses names outside the closed set.
func (d *DType) UnmarshalJSON(b []byte) error {
	v, err := dtypeNames.unmarshal(b, dtypeAliases, "dtype")
	*d = DType(v)
	return err
}

// KVCacheDType is vLLM's --kv-cache-dtype.
type KVCacheDType uint8

// KV-cache data types.
const (
	KVCacheUnset KVCacheDType = iota
	KVCacheAuto
	KVCacheFP8
	KVCacheFP8E4M3
	KVCacheFP8E5M2
)

var kvNames = enumNames{"", "auto", "fp8", "fp8_e4m3", "fp8_e5m2"}

func (k KVCacheDType) String() string { return kvNames.name(uint8(k), "kv_cache_dtype") }

// Valid reports whether k is a member of the closed set.
func (k KVCacheDType) Valid() bool { return kvNames.valid(uint8(k)) }

// ParseKVCacheDType reads an operator's spelling.
func ParseKVCacheDType(s string) (KVCacheDType, bool) {
	v, ok := kvNames.parse(s, nil)
	return KVCacheDType(v), ok
}

// MarshalJSON writes the name (null when unset).
func (k KVCacheDType) MarshalJSON() ([]byte, error) {
	return kvNames.marshal(uint8(k), "kv_cache_dtype")
}

// UnmarshalJSON refuses names outside the closed set.
func (k *KVCacheDType) UnmarshalJSON(b []byte) error {
	v, err := kvNames.unmarshal(b, nil, "kv_cache_dtype")
	*k = KVCacheDType(v)
	return err
}

// Quantization is vLLM's --quantization (unset: the checkpoint's own).
type Quantization uint8

// Quantization methods a correction can name.
const (
	QuantUnset Quantization = iota
	QuantAWQ
	QuantAWQMarlin
	QuantGPTQ
	QuantGPTQMarlin
	QuantFP8
	QuantBitsAndBytes
	QuantCompressedTensors
	QuantMarlin
)

var quantNames = enumNames{"", "awq", "awq_marlin", "gptq", "gptq_marlin", "fp8", "bitsandbytes", "compressed-tensors", "marlin"}

func (q Quantization) String() string { return quantNames.name(uint8(q), "quantization") }

// Valid reports whether q is a member of the closed set.
func (q Quantization) Valid() bool { return quantNames.valid(uint8(q)) }

// ParseQuantization reads an operator's spelling.
func ParseQuantization(s string) (Quantization, bool) {
	v, ok := quantNames.parse(s, nil)
	return Quantization(v), ok
}

// Online reports whether vLLM can apply q to an unquantized checkpoint at
// load time (fp8 dynamic quantization, bitsandbytes in-flight); every
// other method needs a checkpoint produced with it — a different artifact.
func (q Quantization) Online() bool { return q == QuantFP8 || q == QuantBitsAndBytes }

// MarshalJSON writes the name (null when unset).
func (q Quantization) MarshalJSON() ([]byte, error) {
	return quantNames.marshal(uint8(q), "quantization")
}

// UnmarshalJSON refuses names outside the closed set.
func (q *Quantization) UnmarshalJSON(b []byte) error {
	v, err := quantNames.unmarshal(b, nil, "quantization")
	*q = Quantization(v)
	return err
}
