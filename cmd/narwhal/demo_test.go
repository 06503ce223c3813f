package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// A small demo: two engines, one rate, short phases.
var smallDemo = []string{"demo", "--engines", "2", "--rates", "8", "--segment-s", "20", "--workers", "2"}

func TestDemoPrintsTableAndWritesJSON(t *testing.T) {
	dir := t.TempDir()
	var docs [2][]byte
	for i := range docs {
		path := filepath.Join(dir, "r.json")
		code, out, errOut := run(t, append(smallDemo, "--json", path)...)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		testkit.Mentions(t, "stdout", out, "2 engines", "1P1D", "aggregated", "adaptive", "arrow", "adaptive sustains ")
		if !strings.HasPrefix(errOut, "simulated 4 runs in ") {
			t.Errorf("stderr %q, want the run count and wall time", errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = b
	}
	if !bytes.Equal(docs[0], docs[1]) {
		t.Error("two runs with the same seed wrote different JSON")
	}
	var doc struct {
		Schema string    `json:"schema"`
		Rates  []float64 `json:"rates"`
	}
	if err := json.Unmarshal(docs[0], &doc); err != nil || doc.Schema != "narwhal.sim-results" || len(doc.Rates) != 1 || doc.Rates[0] != 2 {
		t.Errorf("JSON %s rates %v err %v, want narwhal.sim-results at 2 req/s (8 per eight engines)", doc.Schema, doc.Rates, err)
	}
}

func TestDemoReplaysTheExampleTrace(t *testing.T) {
	code, out, errOut := run(t, "demo", "--engines", "2", "--trace", "../../examples/traces/moving-small.jsonl")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "replayed trace (60 s at the first rate)") {
		t.Errorf("stdout does not say it replayed the trace:\n%s", out)
	}
}

func TestDemoBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"at\":1,\"input_len\":0,\"output_len\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "--engines", "1"}, 2, "--engines 1: simulate between 2 and 99 engines"},
		{[]string{"demo", "--rates", "4,0"}, 2, "--rates 0: every rate must be a positive"},
		{[]string{"demo", "--segment-s", "0"}, 2, "--segment-s must be a positive"},
		{[]string{"demo", "--trace", "no-such-file.jsonl"}, 2, "--trace: open no-such-file.jsonl"},
		{[]string{"demo", "--trace", bad}, 2, bad + ":1: input_len and output_len must be at least 1"},
		{[]string{"demo", "--engines", "2", "--rates", "1", "--segment-s", "5", "--json", filepath.Join(t.TempDir(), "no", "r.json")},
			1, "check that the directory exists"},
	}
	for _, c := range cases {
		code, _, errOut := run(t, c.args...)
		// One line that says what is wrong.
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, c.code, c.want)
		}
	}
}
