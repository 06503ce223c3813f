package diagnose

import (
	"bytes"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/canon"
)

func diagnoseString(t *testing.T, log string) Diagnosis {
	t.Helper()
	d, err := Diagnose(strings.NewReader(log), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const unknownFailure = `(EngineCore_DP0 pid=%PID%) ERROR %TS% [core.py:700] Traceback (most recent call last):
(EngineCore_DP0 pid=%PID%) ERROR %TS% [core.py:700]   File "%ROOT%/vllm/v1/worker/gpu_model_runner.py", line %N%, in execute_model
(EngineCore_DP0 pid=%PID%) ERROR %TS% [core.py:700] RuntimeError: tensor at %ADDR% of %SIZE% in %ROOT%/cache/x.bin for pid=%PID% at %ISO% failed after %N% steps
`

func fill(tpl string, kv ...string) string {
	return strings.NewReplacer(kv...).Replace(tpl)
}

// TestNormalizeStripsVolatile: two logs that differ only in sizes, paths,
// pids, addresses, timestamps and numbers give one fingerprint and one
// message template.
func TestNormalizeStripsVolatile(t *testing.T) {
	a := diagnoseString(t, fill(unknownFailure, "%PID%", "12", "%TS%", "05-06 12:00:00", "%ROOT%", "/usr/lib/python3.12/site-packages", "%N%", "101", "%ADDR%", "0x7f00aa", "%SIZE%", "1.5 GiB", "%ISO%", "2025-05-06T12:00:00Z"))
	b := diagnoseString(t, fill(unknownFailure, "%PID%", "98765", "%TS%", "11-30 23:59:59", "%ROOT%", "/home/me/.venv/lib/python3.10/site-packages", "%N%", "7", "%ADDR%", "0xdeadbeef", "%SIZE%", "880 MiB", "%ISO%", "2026-01-01T00:00:01.5+02:00"))
	if a.Status != StatusUnrecognized {
		t.Fatalf("status %s", a.Status)
	}
	if a.FingerprintDigest != b.FingerprintDigest || a.MessageTemplateDigest != b.MessageTemplateDigest {
		t.Errorf("fingerprints %s/%s, templates %s/%s", a.FingerprintDigest, b.FingerprintDigest, a.MessageTemplateDigest, b.MessageTemplateDigest)
	}
	c := diagnoseString(t, strings.Replace(fill(unknownFailure, "%PID%", "12", "%TS%", "05-06 12:00:00", "%ROOT%", "/x", "%N%", "1", "%ADDR%", "0x1", "%SIZE%", "1 GiB", "%ISO%", "2025-05-06T12:00:00Z"), "failed after", "diverged after", 1))
	if c.MessageTemplateDigest == a.MessageTemplateDigest {
		t.Error("a different message gave the same template")
	}
}

func TestNormalizeMessage(t *testing.T) {
	got := normalizeMessage("Tried to allocate 1.75 GiB at 0x7f3a for pid=12 in /usr/lib/x.py at 2025-05-06T12:00:00Z id 0123456789abcdef01 seq 5")
	want := "Tried to allocate <size> at <addr> for <pid> in <path> at <ts> id <id> seq <num>"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestWrapperSkipped: the engine-core wrapper does not become the class.
func TestWrapperSkipped(t *testing.T) {
	d := diagnoseString(t, `(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1] Traceback (most recent call last):
(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1]   File "/x/vllm/v1/attention/backends/flash_attn.py", line 9, in forward
(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1] NotImplementedError: something new
Traceback (most recent call last):
  File "/x/vllm/v1/engine/utils.py", line 1, in wait_for_engine_startup
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}
`)
	if d.Fingerprint.ExceptionClass == nil || d.Fingerprint.ExceptionClass.String() != "NotImplementedError" {
		t.Errorf("class %v, want NotImplementedError", d.Fingerprint.ExceptionClass)
	}
	if d.Fingerprint.CallSiteModule == nil || d.Fingerprint.CallSiteModule.String() != "vllm.v1.attention.backends.flash_attn" {
		t.Errorf("module %v", d.Fingerprint.CallSiteModule)
	}
}

// TestCallsiteFromLogPrefix: with no traceback, an unrecognized error's
// call site is the header's file.
func TestCallsiteFromLogPrefix(t *testing.T) {
	d := diagnoseString(t, "ERROR 01-01 00:00:00 [scheduler.py:42] something went wrong\n")
	if d.Status != StatusUnrecognized || d.Fingerprint.CallSiteModule == nil || d.Fingerprint.CallSiteModule.String() != "scheduler" {
		t.Errorf("%s %v", d.Status, d.Fingerprint.CallSiteModule)
	}
}

// TestUnrecognizedStored: an unknown failure is unrecognized, never the
// nearest family, and keeps its sanitized facts.
func TestUnrecognizedStored(t *testing.T) {
	d := diagnoseString(t, `INFO 01-01 00:00:00 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: model='m', dtype=torch.bfloat16, max_seq_len=4096, tensor_parallel_size=2
ERROR 01-01 00:00:01 [core.py:1] KeyError: 'model.layers.0.mlp.experts.w13_weight'
`)
	if d.Status != StatusUnrecognized || d.Family != FamilyUnrecognized || d.Wording != "" {
		t.Errorf("%s %s %s", d.Status, d.Family, d.Wording)
	}
	if d.Facts.MaxModelLen == nil || *d.Facts.MaxModelLen != 4096 || d.Facts.ExceptionClass == nil || d.Facts.ExceptionClass.String() != "KeyError" {
		t.Errorf("facts %+v", d.Facts)
	}
}

// TestOOMNotForced: a CUDA OOM that is neither weight loading nor graph
// capture stays unrecognized.
func TestOOMNotForced(t *testing.T) {
	d := diagnoseString(t, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
	if d.Status != StatusUnrecognized {
		t.Errorf("%s %s", d.Status, d.Family)
	}
}

// TestDeterministic: identical input gives byte-identical canonical
// records, and the diagnosis has a canonical form at all (no omitempty,
// no unsupported values).
func TestDeterministic(t *testing.T) {
	results := loadCorpus(t)
	for _, r := range results {
		a, err := canon.Marshal(r.d)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		d2 := diagnoseFile(t, "testdata/corpus/"+r.name+".log", Options{GPU: r.c.Options.GPU, ModelMaxLen: r.c.Options.ModelMaxLen})
		b, err := canon.Marshal(d2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two runs differ:\n%s\n%s", r.name, a, b)
		}
	}
}

func TestFingerprintDigestIsCanonical(t *testing.T) {
	c, _ := ParseExceptionClass("ValueError")
	m, _ := ParseModule("vllm.v1.core.kv_cache_utils")
	fp := Fingerprint{ExceptionClass: &c, CallSiteModule: &m, Family: FamilyOOMKVCache}
	d, err := fp.Digest()
	if err != nil {
		t.Fatal(err)
	}
	want := canon.Digest([]byte(`{"callsite_module":"vllm.v1.core.kv_cache_utils","error_family":"oom_kv_cache","exception_class":"ValueError"}`))
	if d != want {
		t.Errorf("digest %s, want %s", d, want)
	}
}
