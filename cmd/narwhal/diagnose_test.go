package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// runIn executes the narwhal CLI in-process with stdin.
func runIn(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetIn(stdin)
	code := cli.Run(root, args, &out, &errb)
	return code, out.String(), errb.String()
}

const dgModel = "meta-llama/Llama-3.1-8B-Instruct"

// dgBoot is the simulated start-up of an 8B model (14.99 GiB, 128 KiB of
// KV per token) on an L4 at vLLM's defaults.
func dgBoot(logW io.Writer, maxModelLen int) simengine.Config {
	return simengine.Config{Model: dgModel, Profile: simengine.DefaultProfile("e0"), MaxModelLen: maxModelLen, StartupLog: logW,
		EngineID: "eng-0", Clock: ports.NewFake(time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)),
		Boot: simengine.Boot{GPUName: "NVIDIA L4", GPUTotalBytes: 24 << 30, ComputeCapability: "8.9", WeightsBytes: 16095114526, PID: 4242}} // 14.99 GiB
}

// dgLog writes the startup log of cfg to a file; a boot that succeeds is
// stopped at once.
func dgLog(t *testing.T, dir, name string, cfg simengine.Config) (string, error) {
	t.Helper()
	path := filepath.Join(dir, name)
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cfg.StartupLog = fh
	e, err := simengine.Start(cfg)
	if e != nil {
		e.Close()
	}
	return path, err
}

func dgPlanFile(t *testing.T, dir string, maxModelLen int) string {
	t.Helper()
	p := filepath.Join(dir, "plan.json")
	b := `{"schema":"narwhal.diagnose.plan","schema_version":1,"model_dir":"","plan":{"model":"` + dgModel + `","max_model_len":` +
		jsonInt(maxModelLen) + `,"gpu_memory_utilization":0.9}}`
	if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestDiagnoseTextAndRecords(t *testing.T) {
	dir := t.TempDir()
	logPath, err := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	if err == nil {
		t.Fatal("the broken boot booted")
	}
	st := filepath.Join(dir, "evidence")
	code, out, errOut := run(t, "diagnose", logPath, "--plan", dgPlanFile(t, dir, 131072), "--gpu", "l4", "--store", st)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	testkit.Mentions(t, "output", out,
		"family       oom_kv_cache (recognized)",
		"fingerprint  ValueError at vllm.v1.core.kv_cache_utils (oom_kv_cache)",
		"rule: kv_fit v1 (hypothesis)",
		"rule status  hypothesis for vLLM 0.21",
		"  max_model_len              131072",
		"  kv_available_bytes         4.36 GiB",
		"  max_model_len: 131072 -> 35664",
		"  command: vllm serve "+dgModel+" ",
		"--max-model-len 35664",
		"  trade-off (shorter_context):",
		": Unverified suggestion\n",
		"next         boot the corrected plan, then: narwhal diagnose prove --application ",
	)
	if t.Failed() {
		t.Log(out)
	}
	// the failure record and one application, both decodable
	s := store.Open(st)
	ds, err := s.List()
	if err != nil || len(ds) != 2 {
		t.Fatalf("store holds %v (%v), want a failure and an application", ds, err)
	}
	var failures, apps int
	for _, d := range ds {
		r, _, err := s.Get(d)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := diagnose.DecodeFailure(r); err == nil {
			failures++
			if f.Family != diagnose.FamilyOOMKVCache || f.Rule == nil {
				t.Errorf("failure record %+v", f)
			}
		} else if a, err := diagnose.DecodeApplication(r); err == nil {
			apps++
			if a.CorrectedPlan.MaxModelLen != 35664 || a.MechanismOutcome != diagnose.MechanismNotEvaluated {
				t.Errorf("application %+v", a)
			}
		}
	}
	if failures != 1 || apps != 1 {
		t.Fatalf("%d failure and %d application records", failures, apps)
	}
}

func TestDiagnoseJSONFromStdin(t *testing.T) {
	dir := t.TempDir()
	logPath, _ := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	b, _ := os.ReadFile(logPath)
	code, out, errOut := runIn(t, bytes.NewReader(b), "diagnose", "-", "--gpu", "l4", "--need-max-model-len", "131072",
		"--format", "json", "--store", filepath.Join(dir, "ev"))
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var env struct {
		Status string `json:"status"`
		Data   struct {
			Diagnosis    diagnose.Diagnosis `json:"diagnosis"`
			LogDigest    string             `json:"log_digest"`
			Applications []struct {
				Record      string               `json:"record"`
				Result      string               `json:"result"`
				Command     *string              `json:"command"`
				Application diagnose.Application `json:"application"`
			} `json:"applications"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := env.Data
	if env.Status != "success" || d.Diagnosis.Family != diagnose.FamilyOOMKVCache || len(d.Applications) != 1 || !strings.HasPrefix(d.LogDigest, "1220") {
		t.Fatalf("envelope %+v", env)
	}
	a := d.Applications[0]
	// the fleet needs the original context: the only correction violates it
	if a.Result != string(diagnose.ResultUnverified) || a.Application.RequestOutcome != diagnose.RequestViolated ||
		len(a.Application.ViolatedConstraints) != 1 || a.Application.ViolatedConstraints[0].Requirement != diagnose.ReqMaxModelLen {
		t.Fatalf("application %+v", a)
	}
	if a.Command != nil {
		t.Errorf("no plan names the model, yet a command was rendered: %s", *a.Command)
	}
}

// An unrecognized failure is stored with its facts and no correction.
func TestDiagnoseUnrecognizedStored(t *testing.T) {
	dir := t.TempDir()
	log := "(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] EngineCore failed to start.\n" +
		"(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] Traceback (most recent call last):\n" +
		"(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]   File \"/usr/lib/python3/dist-packages/vllm/v1/engine/frob.py\", line 3, in frob\n" +
		"(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708]     raise KeyError(\n" +
		"(EngineCore_DP0 pid=7) ERROR 09-10 12:00:00 [core.py:708] KeyError: 'flux capacitor 42'\n"
	st := filepath.Join(dir, "ev")
	code, out, errOut := runIn(t, strings.NewReader(log), "diagnose", "-", "--store", st)
	if code != cli.ExitOK || !strings.Contains(out, "family       unrecognized (unrecognized)") || !strings.Contains(out, "needs root_cause") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	ds, _ := store.Open(st).List()
	if len(ds) != 1 {
		t.Fatalf("store %v: want the one failure record", ds)
	}
}

func TestDiagnoseHealthyLogWritesNothing(t *testing.T) {
	dir := t.TempDir()
	logPath, err := dgLog(t, dir, "ok.log", dgBoot(nil, 8192))
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(dir, "ev")
	code, out, _ := run(t, "diagnose", logPath, "--store", st)
	if code != cli.ExitOK || !strings.HasPrefix(out, "no failure: ") || !strings.Contains(out, "kv_capacity_tokens") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if ds, _ := store.Open(st).List(); len(ds) != 0 {
		t.Fatalf("a healthy log wrote %v", ds)
	}
}

func TestDiagnoseBadInput(t *testing.T) {
	dir := t.TempDir()
	logPath, _ := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	badPlan := filepath.Join(dir, "bad.json")
	os.WriteFile(badPlan, []byte(`{"schema":"narwhal.diagnose.plan","schema_version":1,"model_dir":"","plan":{"model":"m; rm -rf /","max_model_len":1}}`), 0o644)
	st := filepath.Join(dir, "ev")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"diagnose"}, "accepts 1 arg"},
		{[]string{"diagnose", filepath.Join(dir, "missing.log")}, "no such file"},
		{[]string{"diagnose", logPath, "--gpu", "Z80"}, "not in the built-in GPU table"},
		{[]string{"diagnose", logPath, "--format", "yaml"}, "--format must be text or json"},
		{[]string{"diagnose", logPath, "--plan", badPlan}, "--plan"},
		{[]string{"diagnose", logPath, "--plan", filepath.Join(dir, "none.json")}, "--plan"},
		{[]string{"diagnose", logPath, "--fleet", filepath.Join(dir, "none.json")}, "none.json"},
		{[]string{"diagnose", logPath, "--engine", "e0"}, "--engine names an engine of --fleet"},
		{[]string{"diagnose", logPath, "--need-max-model-len", "-1"}, "--need-max-model-len"},
		{[]string{"diagnose", "prove", "--boot-log", logPath}, "--application is required"},
		{[]string{"diagnose", "prove", "--application", "nope", "--boot-log", logPath, "--store", st}, "no remediation record"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, errOut := run(t, append(c.args, "--store", st)...)
			if code != cli.ExitInvalid || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d (want 2), stderr %q", code, errOut)
			}
		})
	}
	if ds, _ := store.Open(st).List(); len(ds) != 0 {
		t.Fatalf("bad input wrote %v", ds)
	}
}

// filler is a log of n bytes of ordinary INFO lines, then the failure,
// generated as it is read: the test itself holds none of it.
type filler struct {
	left int64
	tail *strings.Reader
	line []byte
	off  int
}

func newFiller(n int64, tail string) *filler {
	return &filler{left: n, tail: strings.NewReader(tail),
		line: []byte("(APIServer pid=1) INFO 09-10 12:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n")}
}

func (f *filler) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return f.tail.Read(p)
	}
	n := 0
	for n < len(p) && f.left > 0 {
		c := copy(p[n:], f.line[f.off:])
		if int64(c) > f.left {
			c = int(f.left)
		}
		n, f.off, f.left = n+c, (f.off+c)%len(f.line), f.left-int64(c)
	}
	return n, nil
}

// The log is streamed: diagnosing 96 MiB from stdin costs a bounded
// amount of memory, not the log's size.
func TestDiagnoseStreamsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 96 MiB")
	}
	dir := t.TempDir()
	logPath, _ := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	tail, _ := os.ReadFile(logPath)
	const size = 96 << 20
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut := runIn(t, newFiller(size, string(tail)), "diagnose", "-", "--store", filepath.Join(dir, "ev"), "--format", "json")
	runtime.ReadMemStats(&after)
	if code != cli.ExitOK || !strings.Contains(out, `"family":"oom_kv_cache"`) {
		t.Fatalf("exit %d: %s %.300s", code, errOut, out)
	}
	grew := int64(after.HeapSys) - int64(before.HeapSys)
	t.Logf("heap grew by %d MiB for a %d MiB log", grew>>20, size>>20)
	if grew > 48<<20 {
		t.Fatalf("heap grew by %d MiB diagnosing a %d MiB log", grew>>20, size>>20)
	}
}

// A card the GPU table lacks is diagnosed by the memory the operator gives,
// as plan takes it; a name the table knows, in the forms nvidia-smi and
// vLLM print, resolves with or without it.
func TestDiagnoseGPUResolvesAsPlan(t *testing.T) {
	dir := t.TempDir()
	logPath, _ := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	for _, args := range [][]string{
		{"--gpu", "Radeon Pro W7900", "--gpu-memory-gib", "44.98"},
		{"--gpu", "A10", "--gpu-memory-gib", "22.49"},
		{"--gpu", "NVIDIA H100 80GB HBM3"},
		{"--gpu", "NVIDIA A100-SXM4-80GB"},
		{"--gpu-memory-gib", "22.49"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"diagnose", logPath, "--store", filepath.Join(dir, "ev")}, args...)...)
			if code != cli.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
		})
	}
}
