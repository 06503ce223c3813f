package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/cli"
)

func TestSimWithSidecar(t *testing.T) {
	tests := []struct {
		args []string
		n    int
	}{
		{[]string{"sim", "--port", "0", "--attest-port", "0"}, 1},
		{[]string{"sim-fleet", "--engines", "2", "--attest"}, 2},
		{[]string{"sim", "--port", "0"}, 0},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // serve, print, and stop at once
		root := newRoot()
		root.SetContext(ctx)
		var out, errb bytes.Buffer
		code := cli.Run(root, tc.args, &out, &errb)
		if code != 0 || strings.Count(out.String(), "/v1/attestation") != tc.n {
			t.Fatalf("%v: exit %d out %q err %q", tc.args, code, out.String(), errb.String())
		}
	}
}

func TestPlanCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, engine string) string {
		p := filepath.Join(dir, name)
		doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"n0","url":"http://127.0.0.1:8000"}],"slo":{"ttft_s":1,"tpot_s":0.05}` + engine + `}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := write("open.json", "")
	keyed := write("keyed.json", `,"engine":{"engine_api_key_env":"NARWHAL_ENGINE_KEY"}`)
	out := filepath.Join(dir, "runs", "engine-launch-x")
	tests := []struct {
		args     []string
		code     int
		want     string
		launched bool // out/n0/launch.sh exists afterwards
	}{
		{[]string{"plan", "--fleet", open, "--out", out}, 2, "engine.engine_api_key_env is empty", false},
		{[]string{"plan", "--fleet", open, "--out", out, "--allow-unauthenticated"}, 0, "WARNING: the plan starts vLLM without an API key", true},
		{[]string{"plan", "--fleet", keyed, "--out", out}, 1, "never overwritten", true},
		{[]string{"plan", "--fleet", keyed, "--out", out + "-2"}, 0, "launch.sh", true},
		{[]string{"plan"}, 2, "--fleet is required", true},
		{[]string{"plan", "--fleet", filepath.Join(dir, "none.json")}, 2, "none.json", true},
	}
	for _, tc := range tests {
		var o, e bytes.Buffer
		code := cli.Run(newRoot(), tc.args, &o, &e)
		if code != tc.code || !strings.Contains(o.String()+e.String(), tc.want) {
			t.Fatalf("%v: exit %d out %q err %q", tc.args, code, o.String(), e.String())
		}
		if _, err := os.Stat(filepath.Join(out, "n0", "launch.sh")); (err == nil) != tc.launched {
			t.Fatalf("%v: launch.sh exists = %v, want %v", tc.args, err == nil, tc.launched)
		}
	}
	if s, _ := os.ReadFile(filepath.Join(out, "n0", "launch.sh")); !strings.Contains(string(s), "UNAUTHENTICATED") {
		t.Errorf("the unauthenticated launch.sh does not say so:\n%s", s)
	}
}
