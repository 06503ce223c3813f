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
	fl := filepath.Join(dir, "fleet.json")
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[{"iid":"n0","url":"http://127.0.0.1:8000"}],"slo":{"ttft_s":1,"tpot_s":0.05}}`
	if err := os.WriteFile(fl, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runs", "engine-launch-x")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "--fleet", fl, "--out", out}, 0, "launch.sh"},
		{[]string{"plan", "--fleet", fl, "--out", out}, 1, "never overwritten"},
		{[]string{"plan"}, 2, "--fleet is required"},
		{[]string{"plan", "--fleet", filepath.Join(dir, "none.json")}, 2, "none.json"},
	}
	for _, tc := range tests {
		var o, e bytes.Buffer
		if code := cli.Run(newRoot(), tc.args, &o, &e); code != tc.code || !strings.Contains(o.String()+e.String(), tc.want) {
			t.Fatalf("%v: exit %d out %q err %q", tc.args, code, o.String(), e.String())
		}
	}
}
