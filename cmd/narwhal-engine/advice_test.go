package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

// With --model-dir the launch command carries the calculator's
// --max-model-len and --gpu-memory-utilization; a model that does not fit
// is refused before anything is written.
func TestPlanTakesMemoryAdviceFromTheCalculator(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := fixture.Write(model, fixture.Build(fixture.Llama31_8B(), 2)); err != nil {
		t.Fatal(err)
	}
	fleetFile := func(name, gpu string) string {
		p := filepath.Join(dir, name)
		doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"n0","url":"http://127.0.0.1:8000"}],` +
			`"slo":{"ttft_s":1,"tpot_s":0.05},"engine":{"engine_api_key_env":"K"},` +
			`"hardware":{"accelerator":"` + gpu + `","accelerators_per_engine":1,"tensor_parallel":1}}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Run(newRoot(), args, &out, &errb)
		return code, out.String(), errb.String()
	}
	out := filepath.Join(dir, "launch-h100")
	code, stdout, stderr := run("plan", "--fleet", fleetFile("h100.json", "h100-sxm"), "--out", out, "--model-dir", model, "--max-model-len", "32768")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	script, err := os.ReadFile(filepath.Join(out, "n0", "launch.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "--max-model-len 32768") || !strings.Contains(string(script), "--gpu-memory-utilization 0.9") ||
		!strings.Contains(stderr, "memory advice") {
		t.Errorf("launch.sh lacks the advice:\n%s\nstderr %s", script, stderr)
	}
	small := filepath.Join(dir, "launch-small")
	code, _, stderr = run("plan", "--fleet", fleetFile("small.json", "custom"), "--out", small, "--model-dir", model, "--gpu-memory-gib", "8")
	if code != 1 || !strings.Contains(stderr, "does not fit") {
		t.Errorf("an 8B model on 8 GiB: exit %d, %s; want 1 and does not fit", code, stderr)
	}
	if _, err := os.Stat(small); !os.IsNotExist(err) {
		t.Errorf("a refused plan wrote %s", small)
	}
}

// --dp and --enable-expert-parallel: the advice is planned for that layout
// and the command carries vLLM's flags; bad layouts are exit 2, and a
// dp > 1 plan without calibration is refused as unknown, with the reason.
func TestPlanParallelLayoutFlags(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := fixture.Write(model, fixture.Build(fixture.Llama31_8B(), 2)); err != nil {
		t.Fatal(err)
	}
	fl := filepath.Join(dir, "fleet.json")
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"n0","url":"http://127.0.0.1:8000"}],` +
		`"slo":{"ttft_s":1,"tpot_s":0.05},"engine":{"engine_api_key_env":"K"},` +
		`"hardware":{"accelerator":"h100-sxm","accelerators_per_engine":2,"tensor_parallel":1}}`
	if err := os.WriteFile(fl, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string // in stderr, or in launch.sh when code is 0
	}{
		{"ep on dense", []string{"--model-dir", model, "--enable-expert-parallel"}, 0, "--enable-expert-parallel"},
		{"dp2 unknown", []string{"--model-dir", model, "--dp", "2"}, 1, "dp > 1"},
		{"dp0", []string{"--model-dir", model, "--dp", "0"}, 2, "--dp must be ≥ 1"},
		{"dp beyond accelerators", []string{"--model-dir", model, "--dp", "4"}, 2, "accelerators_per_engine 2"},
		{"dp without model", []string{"--dp", "2"}, 2, "add --model-dir"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "launch", string(rune('a'+i)))
			var o, e bytes.Buffer
			code := cli.Run(newRoot(), append([]string{"plan", "--fleet", fl, "--out", out}, c.args...), &o, &e)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, o.String(), e.String())
			}
			got := e.String()
			if code == 0 {
				b, err := os.ReadFile(filepath.Join(out, "n0", "launch.sh"))
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("%q lacks %q", got, c.want)
			}
		})
	}
}
