package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--rate", "1", "--duration", "1"}, "--router is required"},
		{[]string{"bench", "--router", "http://127.0.0.1:1", "--rate", "1"}, "--duration D"},
		{[]string{"bench", "--router", "http://127.0.0.1:1", "--rate", "1", "--sweep", "1,2", "--duration", "1"}, "give one of them"},
		{[]string{"bench", "--router", "http://127.0.0.1:1", "--sweep", "1,-2", "--duration", "1"}, "positive number"},
		{[]string{"bench", "--router", "http://127.0.0.1:1", "--rate", "1", "--duration", "1", "--prompt-tokens", "x"}, "--prompt-tokens"},
		{[]string{"bench", "--router", "127.0.0.1:1", "--rate", "5", "--duration", "1"}, "base URL"},
	} {
		code, _, errOut := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// A router that is not there fails the run (exit 1), naming it.
func TestBenchUnreachableRouter(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b.jsonl")
	code, _, errOut := run(t, "bench", "--router", "http://127.0.0.1:1", "--rate", "5", "--duration", "1", "--out", out, "--quiet")
	if code != 1 || !strings.Contains(errOut, "reach the router at http://127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	j := filepath.Join(dir, "journal.jsonl")
	meta := `{"meta":{"schema":"narwhal.journal","schema_version":1,"package":"narwhal","version":"x","git":null,"source":"sha256:00","token_accounting":"token_ids","started":"2026-01-01T00:00:00Z","part":1}}`
	row := `{"schema":"narwhal.journal","schema_version":1,"run":"r1","rid":"a","client_rid":null,"arrived":1,"input_len":4,"input_sized":true,"wanted_len":4,"output_len":4,"ttft_s":0.2,"tpot_s":0.01,"first_byte_s":0.25,"duration_s":0.3,"crossed":true,"prefill_iid":"p0","decode_iid":"d0","error":null,"terminal":"completed","reason":null}`
	os.WriteFile(j, []byte(meta+"\n"+row+"\n"), 0o644)
	code, out, errOut := run(t, "report", j, "--ttft-slo", "1", "--tpot-slo", "0.05", "--plot", filepath.Join(dir, "p"), "--html", filepath.Join(dir, "r.html"))
	if code != 0 || !strings.Contains(out, "attainment %") || !strings.Contains(out, "100.0") || !strings.Contains(errOut, "chart files") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "ttft-cdf.svg")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "report", j, "--ttft-slo", "1", "--tpot-slo", "0.05", "--format", "json")
	if code != 0 || !strings.Contains(out, `"schema": "narwhal.report"`) {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, "report", j); code != 2 || !strings.Contains(errOut, "--ttft-slo") {
		t.Fatalf("no SLO: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "report", filepath.Join(dir, "none.jsonl"), "--ttft-slo", "1", "--tpot-slo", "1"); code != 2 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing: exit %d, %q", code, errOut)
	}
}

func TestDemoPlot(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := run(t, append(smallDemo, "--plot", dir)...)
	if code != 0 || !strings.Contains(errOut, "chart files") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	for _, f := range []string{"attainment.png", "attainment.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
}
