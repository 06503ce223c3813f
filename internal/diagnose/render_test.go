package diagnose

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// The render side of the log sanitization contract (INV-6): whatever a
// log says, the commands and diffs rendered from a remedy consist only of
// the flag table, numbers, enum names and the operator's model reference.
// The scanner's tests prove the log side (no extracted text in Facts);
// these prove that even adversarial Facts values render inside the closed
// character set.

var (
	renderArg   = regexp.MustCompile(`^[A-Za-z0-9._/+=@:,{}\[\]"-]+$`)
	renderValue = regexp.MustCompile(`^[A-Za-z0-9._,\[\]/-]+$`)
)

// rtOperatorPlan is the fleet's plan for one engine: the only source of the
// model reference.
func rtOperatorPlan(t testing.TB) plan.Plan {
	cfg := &fleet.Config{Model: "org/model-7b", Engines: []fleet.Engine{{IID: "e0", URL: "http://127.0.0.1:8100"}}}
	p, err := plan.FromFleet(cfg, "e0")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRendered renders every correction and fails on any character
// outside the closed sets.
func checkRendered(t interface{ Fatalf(string, ...any) }, r Remedy) {
	for _, c := range r.Corrections {
		argv, err := c.Plan.Args()
		if err != nil {
			t.Fatalf("a correction that does not render: %v (%v)", err, c.Changes)
		}
		for _, a := range argv {
			if !renderArg.MatchString(a) {
				t.Fatalf("rendered argument %q leaves the closed set", a)
			}
		}
		for _, ch := range c.Changes {
			for _, v := range []plan.Value{ch.From, ch.To} {
				if s := v.String(); !renderValue.MatchString(s) {
					t.Fatalf("diff value %q of %s leaves the closed set", s, ch.Field.Path())
				}
			}
		}
	}
	for _, s := range remedyTexts(r) {
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("remedy text %q holds a control character", s)
		}
	}
}

func remedyTexts(r Remedy) []string {
	out := append([]string{}, r.Notes...)
	for _, a := range r.Actions {
		out = append(out, a.Text)
	}
	for _, n := range r.Needs {
		out = append(out, n.What, n.Why)
	}
	for _, c := range r.Corrections {
		out = append(out, c.Basis...)
		for _, t := range c.TradeOffs {
			out = append(out, t.Text)
		}
		for _, v := range c.Violations {
			out = append(out, v.Text)
		}
	}
	return out
}

func drawInt(t *rapid.T, name string) *int64 {
	if !rapid.Bool().Draw(t, name+"?") {
		return nil
	}
	v := rapid.OneOf(rapid.Int64Range(-1<<40, 1<<40), rapid.SampledFrom([]int64{math.MinInt64, -1, 0, 1, 16, 4096, 131072, math.MaxInt64})).Draw(t, name)
	return &v
}

// TestRenderFromFactsClosedCharset draws Facts of every family with every
// numeric field anywhere in int64 (negative, zero, huge) and every closed
// enum, and renders what the rules compute.
func TestRenderFromFactsClosedCharset(t *testing.T) {
	base := rtOperatorPlan(t)
	rapid.Check(t, func(rt *rapid.T) {
		fam := rapid.SampledFrom(Families()).Draw(rt, "family")
		f := Facts{
			RequestedMemoryBytes: drawInt(rt, "requested"), FreeMemoryBytes: drawInt(rt, "free"),
			TotalMemoryBytes: drawInt(rt, "total"), TriedToAllocateBytes: drawInt(rt, "tried"),
			WeightsBytes: drawInt(rt, "weights"), KVAvailableBytes: drawInt(rt, "kv_avail"),
			KVNeededBytes: drawInt(rt, "kv_need"), CUDAGraphBytes: drawInt(rt, "graph"),
			MaxModelLen: drawInt(rt, "max_len"), DerivedMaxModelLen: drawInt(rt, "derived"),
			KVCapacityTokens: drawInt(rt, "kv_tokens"), EstimatedMaxModelLen: drawInt(rt, "estimate"),
			TensorParallelSize: drawInt(rt, "tp"), PipelineParallelSize: drawInt(rt, "pp"),
			NumAttentionHeads: drawInt(rt, "heads"), NumKVHeads: drawInt(rt, "kv_heads"),
			Port: drawInt(rt, "port"), HTTPStatus: drawInt(rt, "http"),
		}
		if rapid.Bool().Draw(rt, "util?") {
			u := rapid.Float64Range(-2, 2).Draw(rt, "util")
			f.GPUMemoryUtilization = &u
		}
		if rapid.Bool().Draw(rt, "cc?") {
			f.ComputeCapability = &ComputeCapability{Major: rapid.IntRange(1, 20).Draw(rt, "major"), Minor: rapid.IntRange(0, 9).Draw(rt, "minor")}
		}
		if rapid.Bool().Draw(rt, "dtype?") {
			d := rapid.SampledFrom([]DType{DTypeFloat16, DTypeBFloat16, DTypeFloat32}).Draw(rt, "dtype")
			f.DType = &d
		}
		if rapid.Bool().Draw(rt, "quant?") {
			q := rapid.SampledFrom([]QuantMethod{"awq", "awq_marlin", "gptq_marlin", "fp8", "marlin", "gguf"}).Draw(rt, "quant")
			f.Quantization = &q
		}
		b := base
		r, err := Remediate(Diagnosis{Status: StatusRecognized, Family: fam, Facts: f}, Input{Plan: &b})
		if err != nil {
			rt.Fatal(err)
		}
		checkRendered(rt, r)
	})
}

// hostileLog carries shell metacharacters, ANSI escapes and newlines in
// every place a log can hold text: a model name, an architecture, a
// path, a dtype and an engine argument dump.
const hostileLog = "\x1b[1;31mERROR\x1b[0m 09-12 10:00:00 [core.py:708] EngineCore failed to start.\n" +
	"(EngineCore_DP0 pid=42) INFO 09-12 10:00:00 [utils.py:233] non-default args: {'model': 'x; rm -rf / #', 'max_model_len': 131072, 'dtype': 'bfloat16$(reboot)', 'served_model_name': '`id`\\n--trust-remote-code'}\n" +
	"(EngineCore_DP0 pid=42) INFO 09-12 10:00:01 [gpu_worker.py:298] Available KV cache memory: 12.35 GiB\n" +
	"(EngineCore_DP0 pid=42) ERROR 09-12 10:00:02 [core.py:708] ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (12.35 GiB). Based on the available memory, the estimated maximum model length is 101120. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.\n" +
	"Traceback (most recent call last):\n  File \"/opt/$(curl evil)/site-packages/vllm/v1/core/kv_cache_utils.py\", line 879, in check\n" +
	"ValueError: model 'Llama\x1b]0;pwned\x07; --trust-remote-code' is not supported\n" +
	"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"

// TestRendererIgnoresLogText (reference/evidence.md §2.12.5): a log
// smuggling commands through a model name produces corrections whose
// rendered commands contain none of it.
func TestRendererIgnoresLogText(t *testing.T) {
	d, err := Diagnose(strings.NewReader(hostileLog), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Family != FamilyOOMKVCache {
		t.Fatalf("the hostile log is a KV failure, got %s", d.Family)
	}
	base := rtOperatorPlan(t)
	r, err := Remediate(d, Input{Plan: &base, GPU: rtGPU(t, "h100-sxm")})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Corrections) < 2 {
		t.Fatalf("the hostile log must still yield corrections: %v (needs %v)", rtChanges(r), r.Needs)
	}
	checkRendered(t, r)
	for _, c := range r.Corrections {
		cmd, err := c.Plan.Command()
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"rm -rf", "trust-remote-code", "$(", "`", ";", "\x1b", "\n", "reboot", "curl", "pwned", "Llama"} {
			if strings.Contains(cmd, bad) {
				t.Fatalf("rendered command %q carries %q from the log", cmd, bad)
			}
		}
	}
	for _, s := range remedyTexts(r) {
		for _, bad := range []string{"rm -rf", "trust-remote-code", "$(", "\x1b", "reboot", "curl", "pwned"} {
			if strings.Contains(s, bad) {
				t.Fatalf("remedy text %q carries %q from the log", s, bad)
			}
		}
	}
}

func TestRemedyText(t *testing.T) {
	w := newWorld(t)
	apps, _ := w.diagnose(t, rtFailLog, 65536)
	cfg := rtFleet()
	d, _ := Diagnose(strings.NewReader(rtFailLog), Options{GPU: "h100-sxm"})
	base, _ := plan.FromFleet(cfg, "e0")
	rem, err := Remediate(d, Input{Plan: &base, GPU: rtGPU(t, "h100-sxm"), Requirements: FleetRequirements(cfg, 65536)})
	if err != nil {
		t.Fatal(err)
	}
	txt := RemedyText(rem, apps)
	for _, want := range []string{
		"rule: kv_fit v1 (hypothesis)",
		"correction 1 application app-1: Unverified suggestion\n  gpu_memory_utilization: unset -> 0.95\n  command: vllm serve org/model-7b --port 8100 --dtype bfloat16 --kv-cache-dtype auto --max-model-len 131072 --gpu-memory-utilization 0.95\n",
		"correction 2 application app-2: Unverified suggestion\n  max_model_len: 131072 -> 101088\n",
		"violates engine_contract.kv_cache_dtype:",
	} {
		if !strings.Contains(txt, want) {
			t.Fatalf("text lacks %q:\n%s", want, txt)
		}
	}
	if strings.ContainsFunc(strings.ReplaceAll(txt, "\n", ""), func(r rune) bool { return r < 0x20 }) {
		t.Fatal("control characters in the text")
	}
}
