package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// End to end: a simulated vLLM engine fails to start and writes its log;
// narwhal diagnose computes a corrected plan from that log; the engine
// started with the corrected command boots; narwhal diagnose prove
// records that boot and derives the result.

type dgApp struct {
	Record      string               `json:"record"`
	Result      string               `json:"result"`
	Command     *string              `json:"command"`
	Application diagnose.Application `json:"application"`
}

// dgDiagnose runs narwhal diagnose --format json and returns the ranked
// applications.
func dgDiagnose(t *testing.T, args ...string) []dgApp {
	t.Helper()
	code, out, errOut := run(t, append([]string{"diagnose", "--format", "json"}, args...)...)
	if code != cli.ExitOK {
		t.Fatalf("narwhal diagnose exit %d: %s", code, errOut)
	}
	var env struct {
		Data struct {
			Applications []dgApp `json:"applications"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(env.Data.Applications) == 0 {
		t.Fatalf("no correction:\n%s", out)
	}
	return env.Data.Applications
}

// dgLaunch applies the corrected command's vLLM flags to the simulated
// engine, as an operator would relaunch with it. The port is left to the
// system: the failed engine's port is only released, not reserved.
func dgLaunch(t *testing.T, argv []string, cfg simengine.Config) simengine.Config {
	t.Helper()
	if len(argv) < 3 || argv[0] != "vllm" || argv[1] != "serve" || argv[2] != dgModel {
		t.Fatalf("corrected command %q", argv)
	}
	num := func(i int) string {
		if i+1 >= len(argv) {
			t.Fatalf("%s has no value", argv[i])
		}
		return argv[i+1]
	}
	for i := 3; i < len(argv); i++ {
		var err error
		switch argv[i] {
		case "--max-model-len":
			cfg.MaxModelLen, err = strconv.Atoi(num(i))
			i++
		case "--gpu-memory-utilization":
			cfg.Boot.GPUMemoryUtilization, err = strconv.ParseFloat(num(i), 64)
			i++
		case "--tensor-parallel-size":
			cfg.Boot.TensorParallelSize, err = strconv.Atoi(num(i))
			i++
		case "--dtype":
			cfg.Boot.DType = num(i)
			i++
		case "--quantization":
			cfg.Boot.Quantization = num(i)
			i++
		case "--enforce-eager":
			cfg.Boot.EnforceEager = true
		case "--pipeline-parallel-size":
			if num(i) != "1" {
				t.Fatalf("the simulated engine has no pipeline parallelism: %q", argv)
			}
			i++
		case "--port":
			i++
		default:
			t.Fatalf("the corrected command sets %s, which the simulated engine does not model: %q", argv[i], argv)
		}
		if err != nil {
			t.Fatalf("%s: %v", argv[i], err)
		}
	}
	return cfg
}

func dgFleet(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fleet.json")
	b := `{"schema":"narwhal.fleet","schema_version":1,"model":"` + dgModel + `",` +
		`"engines":[{"iid":"e0","url":"http://127.0.0.1:8101"}],"slo":{"ttft_s":1,"tpot_s":0.05}}`
	if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type dgProof struct {
	code   int
	result string
	app    diagnose.Application
	boot   diagnose.CorrectedBoot
	out    string
}

func dgProve(t *testing.T, st, id, bootLog string) dgProof {
	t.Helper()
	code, out, errOut := run(t, "diagnose", "prove", "--application", id, "--boot-log", bootLog, "--store", st, "--format", "json")
	var env struct {
		Data struct {
			Result        string                 `json:"result"`
			Application   diagnose.Application   `json:"application"`
			CorrectedBoot diagnose.CorrectedBoot `json:"corrected_boot"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("prove exit %d: %v\n%s\n%s", code, err, out, errOut)
	}
	return dgProof{code, env.Data.Result, env.Data.Application, env.Data.CorrectedBoot, out}
}

// The KV cache cannot hold max_model_len 131072 next to 14.99 GiB of
// weights on an L4; the corrected max_model_len boots; the fleet states no
// context need, so the shorter context violates nothing: Fixed.
func TestDiagnoseEndToEndFixed(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "evidence")
	broken, err := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	var se *simengine.StartupError
	if !errors.As(err, &se) || se.Failure != simengine.BootKVTooSmall {
		t.Fatalf("broken boot: %v", err)
	}
	apps := dgDiagnose(t, broken, "--fleet", dgFleet(t, dir), "--engine", "e0", "--gpu", "l4", "--store", st)
	first := apps[0]
	if first.Result != string(diagnose.ResultUnverified) || first.Command == nil {
		t.Fatalf("first correction %+v", first)
	}
	argv, err := first.Application.CorrectedPlan.Args()
	if err != nil {
		t.Fatal(err)
	}
	cfg := dgLaunch(t, argv, dgBoot(nil, 131072))
	if cfg.MaxModelLen >= 131072 {
		t.Fatalf("the correction did not lower max_model_len: %q", argv)
	}
	fixed, err := dgLog(t, dir, "corrected.log", cfg)
	if err != nil {
		t.Fatalf("the corrected command did not boot: %v", err)
	}
	b, _ := os.ReadFile(fixed)
	if !strings.Contains(string(b), "GPU KV cache size: 35,712 tokens") {
		t.Fatalf("corrected boot log:\n%s", b)
	}

	pf := dgProve(t, st, first.Application.ApplicationID, fixed)
	if pf.code != cli.ExitOK || pf.result != string(diagnose.ResultFixed) || pf.app.MechanismOutcome != diagnose.MechanismVerified ||
		pf.app.RequestOutcome != diagnose.RequestSatisfied || !pf.boot.Healthy || pf.boot.KVCacheTokens != 35712 {
		t.Fatalf("proof exit %d result %q: %s", pf.code, pf.result, pf.out)
	}
	// the store holds the failure, the application, the boot, the
	// corrected application and the rule's promotion
	if ds, _ := store.Open(st).List(); len(ds) != 5 {
		t.Fatalf("store holds %d records, want 5", len(ds))
	}

	// the rule is now verified for vLLM 0.21, yet a new diagnosis of the
	// same failure is still an unverified suggestion until its own proof
	code, out, _ := run(t, "diagnose", broken, "--fleet", dgFleet(t, dir), "--gpu", "l4", "--store", st)
	if code != cli.ExitOK || !strings.Contains(out, "rule status  mechanism_verified for vLLM 0.21") || !strings.Contains(out, ": Unverified suggestion\n") {
		t.Fatalf("re-diagnosis exit %d:\n%s", code, out)
	}

	// the broken log is no proof: the original failure recurs
	bad := dgProve(t, st, first.Application.ApplicationID, broken)
	if bad.code != cli.ExitFailed || bad.app.MechanismOutcome != diagnose.MechanismFailed || bad.result != string(diagnose.ResultUnverified) {
		t.Fatalf("proof with the broken log: exit %d %s", bad.code, bad.out)
	}
}

// The fleet needs the original 131072 tokens, and even
// gpu_memory_utilization 1.0 cannot hold them on an L4: the only
// correction shortens the context. It boots — the mechanism works — but
// violates the need: Alternative with trade-offs.
func TestDiagnoseEndToEndAlternative(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "evidence")
	broken, _ := dgLog(t, dir, "broken.log", dgBoot(nil, 131072))
	apps := dgDiagnose(t, broken, "--plan", dgPlanFile(t, dir, 131072), "--gpu", "l4", "--need-max-model-len", "131072", "--store", st)
	a := apps[0].Application
	if len(a.ViolatedConstraints) == 0 || a.ViolatedConstraints[0].Requirement != diagnose.ReqMaxModelLen || len(a.TradeOffs) == 0 {
		t.Fatalf("correction %+v", a)
	}
	argv, err := a.CorrectedPlan.Args()
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := dgLog(t, dir, "corrected.log", dgLaunch(t, argv, dgBoot(nil, 131072)))
	if err != nil {
		t.Fatalf("the corrected command did not boot: %v", err)
	}
	code, out, errOut := run(t, "diagnose", "prove", "--application", a.ApplicationID, "--boot-log", fixed, "--store", st)
	testkit.Mentions(t, "prove output", out,
		"mechanism    verified:",
		"request      violated",
		"  violated   max_model_len: max_model_len 35664 is below the 131072 tokens the fleet needs",
		"  trade-off  shorter_context:",
		"result       Alternative with trade-offs",
	)
	if code != cli.ExitOK || t.Failed() {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// Each start-up failure the simulated engine computes is diagnosed, and
// the first-ranked correction, launched, boots and is proven.
func TestDiagnoseEndToEndFamilies(t *testing.T) {
	cases := []struct {
		name     string
		family   diagnose.Family
		gpu      string
		modelDir bool // the rule needs the calculator (KV bytes per token)
		mod      func(*simengine.Config)
	}{
		{"bfloat16 on a T4", diagnose.FamilyBF16Unsupported, "t4", false, func(c *simengine.Config) {
			c.MaxModelLen = 4096
			c.Boot.GPUName, c.Boot.GPUTotalBytes, c.Boot.ComputeCapability, c.Boot.WeightsBytes = "Tesla T4", 16<<30, "7.5", 2<<30
		}},
		{"tensor parallel does not divide the heads", diagnose.FamilyTPDivisibility, "l4", false, func(c *simengine.Config) {
			c.MaxModelLen = 4096
			c.Boot.TensorParallelSize = 3
		}},
		{"weights do not fit", diagnose.FamilyOOMWeightLoad, "h100-sxm", true, func(c *simengine.Config) {
			c.Boot.GPUName, c.Boot.GPUTotalBytes, c.Boot.ComputeCapability = "NVIDIA H100 80GB HBM3", 85018877624, "9.0"
			c.Boot.WeightsBytes, c.Boot.KVBytesPerToken, c.Boot.NumAttentionHeads = 141107412992, 327680, 64 // a 70B model
		}},
		{"graph capture out of memory", diagnose.FamilyOOMCUDAGraph, "l4", false, func(c *simengine.Config) {
			c.Compat = simengine.DefaultCompat(c.Model)
			c.Compat.VLLMVersion = "0.11.0"
			c.Boot.GPUMemoryUtilization, c.Boot.CUDAGraphBytes = 0.98, 2<<30
		}},
		{"no memory for cache blocks", diagnose.FamilyNoKVCacheMemory, "l4", true, func(c *simengine.Config) {
			c.MaxModelLen = 4096
			c.Boot.GPUMemoryUtilization = 0.7
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st := filepath.Join(dir, "evidence")
			cfg := dgBoot(nil, 4096)
			tc.mod(&cfg)
			broken, err := dgLog(t, dir, "broken.log", cfg)
			if err == nil {
				t.Fatal("the broken boot booted")
			}
			pf := plan.Plan{MaxModelLen: int64(cfg.MaxModelLen), TensorParallelSize: cfg.Boot.TensorParallelSize, GPUMemoryUtilization: cfg.Boot.GPUMemoryUtilization}
			planPath := filepath.Join(dir, "plan.json")
			b, err := plan.Marshal(pf, "")
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.Replace(string(b), `"model": null`, `"model": "`+dgModel+`"`, 1))
			os.WriteFile(planPath, b, 0o644)
			args := []string{broken, "--plan", planPath, "--gpu", tc.gpu, "--need-max-model-len", "4096", "--store", st}
			if tc.modelDir {
				md := filepath.Join(dir, "model")
				m := fixture.Llama31_8B()
				if tc.family == diagnose.FamilyOOMWeightLoad {
					m = fixture.Llama31_70B()
				}
				if _, err := fixture.Write(md, fixture.Build(m, 1)); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--model-dir", md)
			}
			apps := dgDiagnose(t, args...)
			if f := apps[0].Application.Family; f != tc.family {
				t.Fatalf("family %s, want %s", f, tc.family)
			}
			argv, err := apps[0].Application.CorrectedPlan.Args()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("corrected: %v", argv[3:])
			fixed, err := dgLog(t, dir, "corrected.log", dgLaunch(t, argv, cfg))
			if err != nil {
				t.Fatalf("the corrected command %q did not boot: %v", argv, err)
			}
			p := dgProve(t, st, apps[0].Application.ApplicationID, fixed)
			if p.code != cli.ExitOK || p.app.MechanismOutcome != diagnose.MechanismVerified {
				t.Fatalf("proof exit %d: %s", p.code, p.out)
			}
		})
	}
}

// V0 engines state their KV allocation only as "# cuda blocks: N": a
// healthy V0 boot of the corrected plan proves the fix like a V1 one.
func TestDiagnoseEndToEndV0(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "evidence")
	v0 := func(maxLen int) simengine.Config {
		c := dgBoot(nil, maxLen)
		c.Boot.V0, c.Compat = true, simengine.DefaultCompat(c.Model)
		c.Compat.VLLMVersion = "0.8.5"
		return c
	}
	broken, err := dgLog(t, dir, "broken.log", v0(131072))
	if err == nil {
		t.Fatal("the V0 engine booted with max_model_len 131072 on an L4")
	}
	apps := dgDiagnose(t, broken, "--fleet", dgFleet(t, dir), "--engine", "e0", "--gpu", "l4", "--store", st)
	argv, err := apps[0].Application.CorrectedPlan.Args()
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := dgLog(t, dir, "corrected.log", dgLaunch(t, argv, v0(131072)))
	if err != nil {
		t.Fatalf("the corrected V0 command did not boot: %v", err)
	}
	pf := dgProve(t, st, apps[0].Application.ApplicationID, fixed)
	if pf.code != cli.ExitOK || pf.result != string(diagnose.ResultFixed) || !pf.boot.Healthy || pf.boot.KVCacheBlocks == 0 {
		t.Fatalf("V0 proof exit %d result %q: %s", pf.code, pf.result, pf.out)
	}
}
