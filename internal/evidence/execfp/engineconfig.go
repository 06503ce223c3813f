package execfp

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// EngineConfig is the normalized vLLM engine configuration: the launch
// parameters that change memory, as typed fields, plus every other flag
// the launch carried that narwhal does not model (Other), so that no
// difference in a launch is silently ignored.
//
// Normalization rules (narwhal, reference/evidence.md §2.9.3):
//
//  1. Per-launch values are removed: where the server listens and what it
//     is called (--host, --port, --uds, --root-path, --served-model-name),
//     logging and request-log switches, the KV-events endpoint, TLS files
//     and credentials (--api-key, --hf-token and any flag ending in -key,
//     -token, -secret or -password). The model and tokenizer locations are
//     removed too: the artifact identity names the model.
//  2. Flags take their long form: -tp is --tensor-parallel-size, -pp is
//     --pipeline-parallel-size, -dp is --data-parallel-size, -q is
//     --quantization, and underscores read as hyphens (--max_model_len).
//  3. Values are spelled one way: dtype aliases (half → float16, bf16 →
//     bfloat16, float → float32), lower-case enums, booleans as
//     true/false (--no-X is X=false), sizes as integers.
//  4. A parameter the launch did not set is nil — unknown — until
//     ApplyDefaults fills it from the defaults of the pinned engine
//     version (the engine facts file). Nothing is defaulted from narwhal's
//     own assumptions; a parameter without a known default stays missing.
//  5. Unmodelled flags are kept in Other under their long form, value as
//     given ("true" for a bare flag), sorted by the encoding.
type EngineConfig struct {
	DType                *string  `json:"dtype"`                  // bfloat16, float16, float32, auto
	Quantization         *string  `json:"quantization"`           // runtime method; "none" when not set
	KVCacheDType         *string  `json:"kv_cache_dtype"`         // auto, fp8, fp8_e4m3, fp8_e5m2, …
	BlockSize            *int     `json:"block_size"`             // tokens per KV block
	MaxModelLen          *int64   `json:"max_model_len"`          // -1 asks vLLM to auto-fit
	MaxNumSeqs           *int64   `json:"max_num_seqs"`           //
	MaxNumBatchedTokens  *int64   `json:"max_num_batched_tokens"` //
	GPUMemoryUtilization *float64 `json:"gpu_memory_utilization"` // (0, 1]
	KVCacheMemoryBytes   *int64   `json:"kv_cache_memory_bytes"`  // 0 when not set (profiling decides)
	EnforceEager         *bool    `json:"enforce_eager"`
	EnablePrefixCaching  *bool    `json:"enable_prefix_caching"`
	EnableChunkedPrefill *bool    `json:"enable_chunked_prefill"`
	TensorParallelSize   *int     `json:"tensor_parallel_size"`
	PipelineParallelSize *int     `json:"pipeline_parallel_size"`
	DataParallelSize     *int     `json:"data_parallel_size"`
	EnableExpertParallel *bool    `json:"enable_expert_parallel"`
	CPUOffloadGB         *float64 `json:"cpu_offload_gb"` // 0 when not set
	EnableLoRA           *bool    `json:"enable_lora"`
	MaxLoRARank          *int     `json:"max_lora_rank"`

	Other map[string]string `json:"other_flags"`
}

// engineFlag binds one long flag to its field.
type engineFlag struct {
	boolean bool
	set     func(c *EngineConfig, v string) error
}

func setStr(dst **string) func(*EngineConfig, string) error {
	return func(_ *EngineConfig, v string) error { s := v; *dst = &s; return nil }
}

var engineFlags = func() map[string]func(*EngineConfig) engineFlag {
	str := func(f func(*EngineConfig) **string) func(*EngineConfig) engineFlag {
		return func(c *EngineConfig) engineFlag { return engineFlag{set: setStr(f(c))} }
	}
	i := func(f func(*EngineConfig) **int) func(*EngineConfig) engineFlag {
		return func(c *EngineConfig) engineFlag {
			return engineFlag{set: func(_ *EngineConfig, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("%q is not an integer", v)
				}
				*f(c) = &n
				return nil
			}}
		}
	}
	i64 := func(f func(*EngineConfig) **int64) func(*EngineConfig) engineFlag {
		return func(c *EngineConfig) engineFlag {
			return engineFlag{set: func(_ *EngineConfig, v string) error {
				n, err := parseSize(v)
				if err != nil {
					return err
				}
				*f(c) = &n
				return nil
			}}
		}
	}
	fl := func(f func(*EngineConfig) **float64) func(*EngineConfig) engineFlag {
		return func(c *EngineConfig) engineFlag {
			return engineFlag{set: func(_ *EngineConfig, v string) error {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
					return fmt.Errorf("%q is not a number", v)
				}
				*f(c) = &x
				return nil
			}}
		}
	}
	b := func(f func(*EngineConfig) **bool) func(*EngineConfig) engineFlag {
		return func(c *EngineConfig) engineFlag {
			return engineFlag{boolean: true, set: func(_ *EngineConfig, v string) error {
				x, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not true or false", v)
				}
				*f(c) = &x
				return nil
			}}
		}
	}
	return map[string]func(*EngineConfig) engineFlag{
		"dtype":                  str(func(c *EngineConfig) **string { return &c.DType }),
		"quantization":           str(func(c *EngineConfig) **string { return &c.Quantization }),
		"kv-cache-dtype":         str(func(c *EngineConfig) **string { return &c.KVCacheDType }),
		"block-size":             i(func(c *EngineConfig) **int { return &c.BlockSize }),
		"max-model-len":          i64(func(c *EngineConfig) **int64 { return &c.MaxModelLen }),
		"max-num-seqs":           i64(func(c *EngineConfig) **int64 { return &c.MaxNumSeqs }),
		"max-num-batched-tokens": i64(func(c *EngineConfig) **int64 { return &c.MaxNumBatchedTokens }),
		"gpu-memory-utilization": fl(func(c *EngineConfig) **float64 { return &c.GPUMemoryUtilization }),
		"kv-cache-memory":        i64(func(c *EngineConfig) **int64 { return &c.KVCacheMemoryBytes }),
		"kv-cache-memory-bytes":  i64(func(c *EngineConfig) **int64 { return &c.KVCacheMemoryBytes }),
		"enforce-eager":          b(func(c *EngineConfig) **bool { return &c.EnforceEager }),
		"enable-prefix-caching":  b(func(c *EngineConfig) **bool { return &c.EnablePrefixCaching }),
		"enable-chunked-prefill": b(func(c *EngineConfig) **bool { return &c.EnableChunkedPrefill }),
		"tensor-parallel-size":   i(func(c *EngineConfig) **int { return &c.TensorParallelSize }),
		"pipeline-parallel-size": i(func(c *EngineConfig) **int { return &c.PipelineParallelSize }),
		"data-parallel-size":     i(func(c *EngineConfig) **int { return &c.DataParallelSize }),
		"enable-expert-parallel": b(func(c *EngineConfig) **bool { return &c.EnableExpertParallel }),
		"cpu-offload-gb":         fl(func(c *EngineConfig) **float64 { return &c.CPUOffloadGB }),
		"enable-lora":            b(func(c *EngineConfig) **bool { return &c.EnableLoRA }),
		"max-lora-rank":          i(func(c *EngineConfig) **int { return &c.MaxLoRARank }),
	}
}()

// shortFlags are vLLM's short aliases.
var shortFlags = map[string]string{"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size", "q": "quantization"}

// perLaunchFlags do not describe the execution (rule 1); valued ones
// consume their argument.
var perLaunchFlags = map[string]bool{
	"host": true, "port": true, "uds": true, "root-path": true, "served-model-name": true,
	"model": true, "tokenizer": true, "download-dir": true, "api-key": true, "hf-token": true,
	"ssl-keyfile": true, "ssl-certfile": true, "ssl-ca-certs": true, "ssl-cert-reqs": true,
	"allowed-origins": true, "allowed-methods": true, "allowed-headers": true, "middleware": true,
	"uvicorn-log-level": true, "kv-events-config": true, "config": true, "log-config-file": true,
}

// perLaunchSwitches are boolean per-launch flags.
var perLaunchSwitches = map[string]bool{
	"disable-log-requests": true, "enable-log-requests": true, "disable-log-stats": true,
	"disable-uvicorn-access-log": true, "allow-credentials": true, "disable-fastapi-docs": true,
	"enable-request-id-headers": true, "disable-frontend-multiprocessing": true,
}

func isCredentialFlag(name string) bool {
	for _, s := range []string{"-key", "-token", "-secret", "-password", "-keyfile"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return name == "key" || name == "token"
}

// ParseServeArgs reads the arguments of `vllm serve` (after the
// subcommand; a leading positional model is a location and is dropped) into
// an EngineConfig by the rules above. An unmodelled flag followed by a
// word that does not start with "-" takes it as its value. Errors name the
// flag and the value.
func ParseServeArgs(args []string) (EngineConfig, error) {
	c := EngineConfig{Other: map[string]string{}}
	for i := 0; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") {
			continue // the positional model location
		}
		a := readServeFlag(args[i])
		takeNext := func() (string, bool) {
			if a.hasVal {
				return a.val, true
			}
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				return args[i], true
			}
			return "", false
		}
		if err := c.apply(a, takeNext); err != nil {
			return EngineConfig{}, err
		}
	}
	return c, nil
}

// serveFlag is one flag of the command line: its long name with "_"
// spelled "-", and the value written after "=", if any.
type serveFlag struct {
	name, val string
	hasVal    bool
}

func readServeFlag(a string) serveFlag {
	name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
	name = strings.ReplaceAll(name, "_", "-")
	if long, ok := shortFlags[name]; ok && !strings.HasPrefix(a, "--") {
		name = long
	}
	return serveFlag{name: name, val: val, hasVal: hasVal}
}

// apply records one flag; takeNext yields its value (consuming the next
// argument when it was not written after "=").
func (c *EngineConfig) apply(a serveFlag, takeNext func() (string, bool)) error {
	name := a.name
	if perLaunchSwitches[name] {
		return nil
	}
	if perLaunchFlags[name] || isCredentialFlag(name) {
		takeNext()
		return nil
	}
	negated := false
	if base, ok := strings.CutPrefix(name, "no-"); ok {
		if mk, known := engineFlags[base]; known && mk(c).boolean {
			name, negated = base, true
		}
	}
	mk, known := engineFlags[name]
	if !known {
		v, ok := takeNext()
		if !ok {
			v = "true"
		}
		c.Other[name] = v
		return nil
	}
	f := mk(c)
	v := "true"
	switch {
	case negated:
		v = "false"
	case f.boolean && a.hasVal:
		v = a.val
	case !f.boolean:
		var ok bool
		if v, ok = takeNext(); !ok {
			return fmt.Errorf("execfp: --%s needs a value", name)
		}
	}
	if err := f.set(c, v); err != nil {
		return fmt.Errorf("execfp: --%s: %w", name, err)
	}
	return nil
}

// parseSize reads an integer with vLLM's human-readable suffixes
// (vllm/engine/arg_utils.py human_readable_int): lower-case k, m, g, t are
// decimal and admit a fraction (32k = 32000, 25.6k = 25600, truncated as
// vLLM's int(float(n) × mult) does), upper-case K, M, G, T are binary and
// integral (32K = 32768).
func parseSize(v string) (int64, error) {
	mults := map[byte]int64{'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}
	mult, num := int64(1), v
	if n := len(v); n > 1 {
		if m, ok := mults[v[n-1]]; ok {
			mult, num = m, v[:n-1]
		}
	}
	if strings.Contains(num, ".") && mult > 1 && strings.ContainsAny(v[len(v)-1:], "kmgt") {
		r, ok := new(big.Rat).SetString(num)
		if !ok || r.Sign() < 0 {
			return 0, fmt.Errorf("%q is not a size", v)
		}
		r.Mul(r, new(big.Rat).SetInt64(mult))
		q := new(big.Int).Quo(r.Num(), r.Denom())
		if !q.IsInt64() || q.Int64() > 1<<53-1 {
			return 0, fmt.Errorf("%q is out of range", v)
		}
		return q.Int64(), nil
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	if n > (1<<53-1)/mult || n < -(1<<53-1)/mult {
		return 0, fmt.Errorf("%q is out of range", v)
	}
	return n * mult, nil
}

// ApplyDefaults fills every unset parameter of c from defaults (the pinned
// engine version's defaults, from the engine facts file) and returns the
// result; c's own values win. A parameter neither sets stays nil.
func ApplyDefaults(c, defaults EngineConfig) EngineConfig {
	fill := func(dst, src any) {
		switch d := dst.(type) {
		case **string:
			if *d == nil {
				*d = src.(*string)
			}
		case **int:
			if *d == nil {
				*d = src.(*int)
			}
		case **int64:
			if *d == nil {
				*d = src.(*int64)
			}
		case **float64:
			if *d == nil {
				*d = src.(*float64)
			}
		case **bool:
			if *d == nil {
				*d = src.(*bool)
			}
		}
	}
	fill(&c.DType, defaults.DType)
	fill(&c.Quantization, defaults.Quantization)
	fill(&c.KVCacheDType, defaults.KVCacheDType)
	fill(&c.BlockSize, defaults.BlockSize)
	fill(&c.MaxModelLen, defaults.MaxModelLen)
	fill(&c.MaxNumSeqs, defaults.MaxNumSeqs)
	fill(&c.MaxNumBatchedTokens, defaults.MaxNumBatchedTokens)
	fill(&c.GPUMemoryUtilization, defaults.GPUMemoryUtilization)
	fill(&c.KVCacheMemoryBytes, defaults.KVCacheMemoryBytes)
	fill(&c.EnforceEager, defaults.EnforceEager)
	fill(&c.EnablePrefixCaching, defaults.EnablePrefixCaching)
	fill(&c.EnableChunkedPrefill, defaults.EnableChunkedPrefill)
	fill(&c.TensorParallelSize, defaults.TensorParallelSize)
	fill(&c.PipelineParallelSize, defaults.PipelineParallelSize)
	fill(&c.DataParallelSize, defaults.DataParallelSize)
	fill(&c.EnableExpertParallel, defaults.EnableExpertParallel)
	fill(&c.CPUOffloadGB, defaults.CPUOffloadGB)
	fill(&c.EnableLoRA, defaults.EnableLoRA)
	fill(&c.MaxLoRARank, defaults.MaxLoRARank)
	other := map[string]string{}
	for k, v := range defaults.Other {
		other[k] = v
	}
	for k, v := range c.Other {
		other[k] = v
	}
	c.Other = other
	return c
}

var dtypeAliases = map[string]string{"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32", "fp32": "float32"}

// normalized applies rule 3 and checks ranges; it never fills a value.
func (c EngineConfig) normalized() (EngineConfig, error) {
	lower := func(p **string) {
		if *p != nil {
			s := strings.ToLower(strings.TrimSpace(**p))
			*p = &s
		}
	}
	lower(&c.DType)
	lower(&c.Quantization)
	lower(&c.KVCacheDType)
	if c.DType != nil {
		if a, ok := dtypeAliases[*c.DType]; ok {
			c.DType = &a
		}
	}
	if c.Quantization != nil && *c.Quantization == "" {
		none := "none"
		c.Quantization = &none
	}
	if u := c.GPUMemoryUtilization; u != nil && !(*u > 0 && *u <= 1) {
		return EngineConfig{}, fmt.Errorf("execfp: engine_config.gpu_memory_utilization %v: want a fraction in (0, 1]", *u)
	}
	if m := c.MaxModelLen; m != nil && *m < 1 && *m != -1 {
		return EngineConfig{}, fmt.Errorf("execfp: engine_config.max_model_len %d: want a token count, or -1 for auto-fit", *m)
	}
	for _, p := range []struct {
		name string
		v    *int64
	}{{"max_num_seqs", c.MaxNumSeqs}, {"max_num_batched_tokens", c.MaxNumBatchedTokens}} {
		if p.v != nil && *p.v < 1 {
			return EngineConfig{}, fmt.Errorf("execfp: engine_config.%s %d: want 1 or more", p.name, *p.v)
		}
	}
	if k := c.KVCacheMemoryBytes; k != nil && *k < 0 {
		return EngineConfig{}, fmt.Errorf("execfp: engine_config.kv_cache_memory_bytes %d is negative", *k)
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"block_size", c.BlockSize}, {"tensor_parallel_size", c.TensorParallelSize}, {"pipeline_parallel_size", c.PipelineParallelSize}, {"data_parallel_size", c.DataParallelSize}} {
		if p.v != nil && *p.v < 1 {
			return EngineConfig{}, fmt.Errorf("execfp: engine_config.%s %d: want 1 or more", p.name, *p.v)
		}
	}
	other := map[string]string{}
	for k, v := range c.Other {
		k = strings.ReplaceAll(strings.TrimLeft(k, "-"), "_", "-")
		if !isASCIIName(strings.ReplaceAll(k, "-", "_")) {
			return EngineConfig{}, fmt.Errorf("execfp: engine_config.other_flags key %q: flag names are ASCII", k)
		}
		if perLaunchFlags[k] || perLaunchSwitches[k] || isCredentialFlag(k) {
			continue
		}
		other[k] = v
	}
	c.Other = other
	return c, nil
}

// missing lists the unset parameters, as engine_config.<name>, sorted.
func (c EngineConfig) missing() []string {
	var out []string
	for _, p := range []struct {
		name  string
		isNil bool
	}{
		{"dtype", c.DType == nil}, {"quantization", c.Quantization == nil}, {"kv_cache_dtype", c.KVCacheDType == nil},
		{"block_size", c.BlockSize == nil}, {"max_model_len", c.MaxModelLen == nil}, {"max_num_seqs", c.MaxNumSeqs == nil},
		{"max_num_batched_tokens", c.MaxNumBatchedTokens == nil}, {"gpu_memory_utilization", c.GPUMemoryUtilization == nil},
		{"kv_cache_memory_bytes", c.KVCacheMemoryBytes == nil}, {"enforce_eager", c.EnforceEager == nil},
		{"enable_prefix_caching", c.EnablePrefixCaching == nil}, {"enable_chunked_prefill", c.EnableChunkedPrefill == nil},
		{"tensor_parallel_size", c.TensorParallelSize == nil}, {"pipeline_parallel_size", c.PipelineParallelSize == nil},
		{"data_parallel_size", c.DataParallelSize == nil}, {"enable_expert_parallel", c.EnableExpertParallel == nil},
		{"cpu_offload_gb", c.CPUOffloadGB == nil}, {"enable_lora", c.EnableLoRA == nil}, {"max_lora_rank", c.MaxLoRARank == nil},
	} {
		if p.isNil {
			out = append(out, "engine_config."+p.name)
		}
	}
	sort.Strings(out)
	return out
}
