package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

func llamaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := fixture.Write(dir, fixture.Build(fixture.Llama31_8B(), 4)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// storeRecords lists the record files of an evidence store (its subject
// index lives beside them and is not a record).
func storeRecords(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	_ = filepath.Walk(filepath.Join(dir, "records"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	return names
}

func TestPlanLlama8BOnH100(t *testing.T) {
	model, st := llamaDir(t), t.TempDir()
	code, out, errb := runCLI(t, "plan", "--model-dir", model, "--gpu", "h100-sxm", "--max-model-len", "8192", "--store", st)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	testkit.Mentions(t, "summary", out, "LlamaForCausalLM", "fits", "weights", "KV tokens", "tier", "candidate", "record")
	if n := len(storeRecords(t, st)); n != 2 {
		t.Errorf("%d files in the store, want the prediction record and the source record", n)
	}
	t.Log("\n" + out)
}

func TestPlanJSONIsDeterministicApartFromTime(t *testing.T) {
	model := llamaDir(t)
	var preds [2]string
	for i := range preds {
		code, out, errb := runCLI(t, "plan", "--model-dir", model, "--gpu", "a100-80gb", "--format", "json", "--store", t.TempDir())
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errb)
		}
		var env struct {
			Data struct {
				Prediction json.RawMessage `json:"prediction"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		preds[i] = string(env.Data.Prediction)
	}
	if preds[0] != preds[1] || preds[0] == "" {
		t.Errorf("two plans of the same input differ:\n%s\n%s", preds[0], preds[1])
	}
}

// Bad input is exit 2 with one line naming what is wrong, and nothing is
// written to the store.
func TestPlanBadInputWritesNothing(t *testing.T) {
	model := llamaDir(t)
	torn := t.TempDir()
	if err := os.WriteFile(filepath.Join(torn, "model.safetensors"), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{'}, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(torn, "config.json"), []byte(`{}`), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no model dir", []string{"--gpu", "h100-sxm"}, "--model-dir is required"},
		{"unknown gpu", []string{"--model-dir", model, "--gpu", "h900"}, "h900"},
		{"no gpu", []string{"--model-dir", model}, "--gpu is required"},
		{"malformed vllm version", []string{"--model-dir", model, "--gpu", "h100-sxm", "--vllm-version", "banana"}, "--vllm-version"},
		{"torn header", []string{"--model-dir", torn, "--gpu", "h100-sxm"}, "model.safetensors"},
		{"bad format", []string{"--model-dir", model, "--gpu", "h100-sxm", "--format", "yaml"}, "--format"},
		{"missing log", []string{"--model-dir", model, "--gpu", "h100-sxm", "--compare-log", "/nonexistent.log"}, "nonexistent.log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := t.TempDir()
			code, out, errb := runCLI(t, append([]string{"plan", "--store", st}, c.args...)...)
			lines := strings.Split(strings.TrimSpace(errb), "\n")
			if code != 2 || !strings.Contains(errb, c.want) || len(lines) != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line naming %q (stdout %q)", code, errb, c.want, out)
			}
			if n := len(storeRecords(t, st)); n != 0 {
				t.Errorf("bad input wrote %d files to the store", n)
			}
		})
	}
}

// --compare-log prints the prediction beside a vLLM startup log: weights
// within ±3 %, available KV within ±10 % where the log's inputs are known.
func TestPlanCompareLog(t *testing.T) {
	model := llamaDir(t)
	log := filepath.Join("..", "..", "internal", "evidence", "memory", "testdata", "vllmlog", "v0_6_6_single.log")
	st := t.TempDir()
	code, out, errb := runCLI(t, "plan", "--model-dir", model, "--gpu", "a100-80gb", "--max-model-len", "131072",
		"--store", st, "--compare-log", log, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	// The log's observation is stored beside the plan, measured, with the
	// plan's execution fingerprint.
	obs := 0
	rs, _ := store.Open(st).Records()
	for _, r := range rs {
		if r.Record.Claim.Quantity == "memory_observation" && r.Record.EpistemicStatus == evidence.Measured && r.Record.Subject["execution"] != "" {
			obs++
		}
	}
	if obs != 1 {
		t.Fatalf("%d memory observation records stored, want the log's one", obs)
	}
	var env struct {
		Data struct {
			Comparisons []struct {
				Figures []struct {
					Figure   string   `json:"figure"`
					Compared bool     `json:"compared"`
					RelError *float64 `json:"rel_error"`
				} `json:"figures"`
			} `json:"comparisons"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(env.Data.Comparisons) != 1 {
		t.Fatalf("%d comparisons, want one (a single-GPU log)", len(env.Data.Comparisons))
	}
	bounds := map[string]float64{"weights": 0.03, "available_kv": 0.10}
	seen := map[string]bool{}
	for _, f := range env.Data.Comparisons[0].Figures {
		bound, ok := bounds[f.Figure]
		if !ok {
			continue
		}
		seen[f.Figure] = true
		if !f.Compared || f.RelError == nil || *f.RelError > bound || *f.RelError < -bound {
			t.Errorf("%s: compared %v, error %v; want within ±%.0f%%", f.Figure, f.Compared, f.RelError, bound*100)
		} else {
			t.Logf("%s error %+.2f%%", f.Figure, *f.RelError*100)
		}
	}
	if len(seen) != len(bounds) {
		t.Errorf("figures compared: %v, want %v", seen, bounds)
	}
	code, text, _ := runCLI(t, "plan", "--model-dir", model, "--gpu", "a100-80gb", "--max-model-len", "131072",
		"--store", t.TempDir(), "--compare-log", log)
	if code != 0 || !strings.Contains(text, "compared with the log") {
		t.Errorf("text output lacks the comparison:\n%s", text)
	}
}

func modelDir(t *testing.T, s fixture.Spec) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := fixture.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// --dp and --enable-expert-parallel (vLLM's --data-parallel-size and
// --enable-expert-parallel): the plan states per-GPU weights of one rank,
// never the fleet's sum, and EP on a dense model is a note, not an error.
func TestPlanParallelFlags(t *testing.T) {
	// Qwen3-30B-A3B at TP 1 × DP 8 with EP, by hand from the fixture
	// shapes: attention whole, 128/8 experts of 3·768·2048, norms and
	// router, untied vocab 151936 × 2048, final norm, BF16, rope cache.
	const q3DP8 = (48*((4096*2048+512*2048+512*2048+2048*4096)+128*3*768*2048/8+(2*2048+2*128+128*2048))+
		2*151936*2048+2048)*2 + 40960*128*2
	qwen := modelDir(t, fixture.Build(fixture.Qwen3_30B_A3B(), 2))
	llama := llamaDir(t)
	cases := []struct {
		name    string
		args    []string
		weights int64 // 0: not checked
		gpus    int
		note    string
	}{
		{"qwen dp8 ep", []string{"--model-dir", qwen, "--dp", "8", "--enable-expert-parallel"}, q3DP8, 8, "expert parallel"},
		{"llama tp8", []string{"--model-dir", llama, "--tp", "8"}, 0, 8, ""},
		{"ep on dense", []string{"--model-dir", llama, "--tp", "2", "--enable-expert-parallel"}, 0, 2, "no experts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"plan", "--gpu", "h100-sxm", "--format", "json", "--store", t.TempDir()}, c.args...)
			code, out, errb := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errb)
			}
			var env struct {
				Data struct {
					Prediction struct {
						WeightBytesPerRank struct {
							Bytes  int64  `json:"bytes"`
							Status string `json:"status"`
						} `json:"weight_bytes_per_rank"`
						GPUsNeeded int      `json:"gpus_needed"`
						Notes      []string `json:"notes"`
					} `json:"prediction"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(out), &env); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			p := env.Data.Prediction
			if c.weights != 0 && p.WeightBytesPerRank.Bytes != c.weights {
				t.Errorf("weights per GPU %d (%s), want %d", p.WeightBytesPerRank.Bytes, p.WeightBytesPerRank.Status, c.weights)
			}
			if p.GPUsNeeded != c.gpus {
				t.Errorf("gpus needed %d, want %d", p.GPUsNeeded, c.gpus)
			}
			if c.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", p.Notes, c.note)
			}
		})
	}
	code, text, _ := runCLI(t, "plan", "--gpu", "h100-sxm", "--store", t.TempDir(), "--model-dir", qwen, "--dp", "8", "--enable-expert-parallel")
	if code != 0 {
		t.Fatalf("text plan exit %d", code)
	}
	testkit.Mentions(t, "text", text, "on 8 × H100", "tp 1 × pp 1 × dp 8 = 8 GPUs", "expert parallel over 8 ranks", "per GPU", "dp > 1")
	if strings.Contains(text, "the hardware lists") {
		t.Errorf("the hardware count ignores the DP ranks:\n%s", text)
	}
}

// A parallel size below 1 is bad input: exit 2, one line, nothing written.
func TestPlanParallelBadInput(t *testing.T) {
	model := llamaDir(t)
	for _, c := range []struct{ flag, v string }{{"--dp", "0"}, {"--dp", "-2"}, {"--tp", "0"}, {"--pp", "0"}} {
		t.Run(c.flag+"="+c.v, func(t *testing.T) {
			st := t.TempDir()
			code, _, errb := runCLI(t, "plan", "--store", st, "--model-dir", model, "--gpu", "h100-sxm", c.flag, c.v)
			if code != 2 || !strings.Contains(errb, c.flag+" must be ≥ 1") || strings.Count(strings.TrimSpace(errb), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want 2 and one line naming %s", code, errb, c.flag)
			}
			if n := len(storeRecords(t, st)); n != 0 {
				t.Errorf("bad input wrote %d files", n)
			}
		})
	}
}

// evidence candidates stores the graph of a checkpoint and its AWQ
// sibling; plan then lists the stored candidates of its lineage.
func TestCandidateGraphStoredAndReadByPlan(t *testing.T) {
	base, awq, st := llamaDir(t), t.TempDir(), t.TempDir()
	if _, err := fixture.Write(awq, fixture.Must(fixture.AWQ(fixture.Build(fixture.Llama31_8B(), 2), 128))); err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, "evidence", "candidates", "--model-dir", base, "--model-dir", awq, "--hash-all", "--store", st, "--format", "json")
	if code != 0 {
		t.Fatalf("candidates: exit %d\n%s\n%s", code, out, errb)
	}
	var env struct {
		Data struct {
			Record string                 `json:"record"`
			Graph  planner.CandidateGraph `json:"graph"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || len(env.Data.Graph.Candidates) != 2 {
		t.Fatalf("graph %+v (%v)\n%s", env.Data.Graph, err, out)
	}
	methods := map[string]bool{}
	for _, c := range env.Data.Graph.Candidates {
		methods[c.Spec.Quantization.Method] = true
		if c.Spec.Quantization.Method != "awq" && c.Runtime == nil {
			t.Errorf("the unquantized checkpoint has no runtime transform candidate: %+v", c)
		}
	}
	if !methods["awq"] {
		t.Fatalf("no awq candidate: %v", methods)
	}
	code, out, errb = runCLI(t, "plan", "--model-dir", base, "--gpu", "h100-sxm", "--max-model-len", "8192", "--store", st, "--format", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errb)
	}
	var plan struct {
		Data struct {
			Candidates struct {
				Graph      string              `json:"graph"`
				Candidates []planner.Candidate `json:"candidates"`
			} `json:"candidates"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Data.Candidates.Graph != env.Data.Record || len(plan.Data.Candidates.Candidates) != 2 {
		t.Fatalf("plan's candidates %+v (%v); want the stored graph %s", plan.Data.Candidates, err, env.Data.Record)
	}
	if code, _, errb := runCLI(t, "evidence", "candidates", "--store", st); code != 2 || !strings.Contains(errb, "--model-dir") {
		t.Fatalf("no --model-dir: exit %d %s", code, errb)
	}
}
