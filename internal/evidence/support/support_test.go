package support

import (
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func reg(t *testing.T) Registry {
	t.Helper()
	r, ok, err := LoadRegistry("0.11.0")
	if err != nil || !ok {
		t.Fatalf("registry for 0.11.0: %v %v", ok, err)
	}
	return r
}

func key(arch, gpu, cpu string) Key {
	return Key{Architecture: arch, EngineVersion: "0.11.0", GPUArch: gpu, CPUArch: cpu}
}

func TestRegistryNative(t *testing.T) {
	e := Derive(key("Qwen3ForCausalLM", "sm_90", "x86_64"), reg(t), nil)
	if e.State != NativeVLLM || len(e.Evidence) == 0 || !strings.Contains(e.Reason, "registry") {
		t.Fatalf("%+v", e)
	}
}

func TestFallbackTransformers(t *testing.T) {
	e := Derive(key("MyNewForCausalLM", "sm_90", "x86_64"), reg(t), nil)
	if e.State != TransformersBackend || !strings.Contains(e.Reason, "TransformersForCausalLM") {
		t.Fatalf("%+v", e)
	}
	if e := Derive(key("MyEncoderModel", "sm_90", "x86_64"), reg(t), nil); e.State != Unsupported {
		t.Fatalf("an architecture with no fallback class: %+v", e)
	}
}

func TestBuildTargetsComeFirst(t *testing.T) {
	cases := []struct {
		k   Key
		msg string
	}{
		{key("Qwen3ForCausalLM", "sm_61", "x86_64"), "sm_61 is not among them"},
		{key("Qwen3ForCausalLM", "sm_90", "ppc64le"), "ppc64le is not one"},
	}
	for _, c := range cases {
		if e := Derive(c.k, reg(t), nil); e.State != Unsupported || !strings.Contains(e.Reason, c.msg) {
			t.Errorf("%s: %+v", c.k, e)
		}
	}
}

func TestFailureMakesRecognizedButFailed(t *testing.T) {
	k := key("Qwen3ForCausalLM", "sm_75", "x86_64")
	obs := []Observation{{Key: k, State: RecognizedButFailed, Record: "1220aa"}}
	e := Derive(k, reg(t), obs)
	if e.State != RecognizedButFailed || len(e.Evidence) != 1 || e.Evidence[0] != "1220aa" {
		t.Fatalf("%+v", e)
	}
	// The same failure on an architecture the registry does not know is unsupported.
	u := key("MyEncoderModel", "sm_75", "x86_64")
	if e := Derive(u, reg(t), []Observation{{Key: u, State: RecognizedButFailed, Record: "1220bb"}}); e.State != Unsupported {
		t.Fatalf("%+v", e)
	}
	// An explicit unsupported mark outranks a failure on the same key.
	obs = append(obs, Observation{Key: k, State: Unsupported, Record: "1220cc"})
	if e := Derive(k, reg(t), obs); e.State != Unsupported || e.Evidence[0] != "1220cc" {
		t.Fatalf("%+v", e)
	}
}

func TestDimensionsIndependent(t *testing.T) {
	failed := key("Qwen3ForCausalLM", "sm_75", "x86_64")
	obs := []Observation{{Key: failed, State: RecognizedButFailed, Record: "1220aa"}}
	for _, k := range []Key{key("Qwen3ForCausalLM", "sm_90", "x86_64"), key("Qwen3ForCausalLM", "sm_75", "aarch64"),
		{Architecture: "Qwen3ForCausalLM", EngineVersion: "0.10.2", GPUArch: "sm_75", CPUArch: "x86_64"}} {
		if e := Derive(k, reg(t), obs); e.State != NativeVLLM {
			t.Errorf("%s took the failure of %s: %+v", k, failed, e)
		}
	}
}

func TestPluginFromRecord(t *testing.T) {
	k := key("AcmeForCausalLMv2Model", "sm_90", "x86_64")
	e := Derive(k, reg(t), []Observation{{Key: k, State: Plugin, Plugin: "acme-vllm@1.2.0", Record: "1220dd"}})
	if e.State != Plugin || e.Plugin != "acme-vllm@1.2.0" {
		t.Fatalf("%+v", e)
	}
}

func TestUnknownVersionHasNoRegistry(t *testing.T) {
	if _, ok, err := LoadRegistry("0.8.5"); ok || err != nil {
		t.Fatalf("0.8.5: ok %v err %v; want no registry and no error", ok, err)
	}
	if _, _, err := LoadRegistry("banana"); err == nil {
		t.Fatal("a malformed version was accepted")
	}
}

func TestRecordRoundTripThroughStore(t *testing.T) {
	st := store.Open(t.TempDir())
	clock := ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC))
	k := key("Qwen3ForCausalLM", "sm_75", "x86_64")
	if _, err := NewRecord(Mark{Key: k, State: RecognizedButFailed, Level: evidence.CommunityReported}, clock); err == nil {
		t.Fatal("recognized_but_failed without a failure record was accepted")
	}
	failure := "1220" + strings.Repeat("ab", 32)
	r, err := NewRecord(Mark{Key: k, State: RecognizedButFailed, Inputs: []string{failure}, Reason: "boot failed", Level: evidence.CommunityReported}, clock)
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.PutRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := Lookup(st, k)
	if err != nil || !ok || e.State != RecognizedButFailed || e.Evidence[0] != d {
		t.Fatalf("%+v %v %v", e, ok, err)
	}
}

func TestArchNames(t *testing.T) {
	if GPUArchFromCC("9.0") != "sm_90" || GPUArchFromCC("12.0") != "sm_120" || GPUArchFromCC("gfx942") != "gfx942" || GPUArchFromCC("") != "" {
		t.Fatal("compute capability names")
	}
	if CPUArchFromGOARCH("amd64") != "x86_64" || CPUArchFromGOARCH("arm64") != "aarch64" {
		t.Fatal("cpu arch names")
	}
}
