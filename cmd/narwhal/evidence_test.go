package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	code := cli.Run(root, args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvidenceCanonAndDigest(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "x.json", `{"b": [1.0, "x\/y"], "a": -0}`)
	cases := []struct {
		args []string
		code int
		out  string
		err  string
	}{
		{[]string{"evidence", "canon", good}, 0, `{"a":0,"b":[1,"x/y"]}`, ""},
		{[]string{"evidence", "digest", good}, 0, canon.Digest([]byte(`{"a":0,"b":[1,"x/y"]}`)) + "\n", ""},
		{[]string{"evidence", "digest", writeFile(t, dir, "dup.json", `{"a":1,"a":2}`)}, 2, "", "duplicate_key"},
		{[]string{"evidence", "digest", writeFile(t, dir, "big.json", `[9007199254740993]`)}, 2, "", "integer_out_of_range"},
		{[]string{"evidence", "digest", writeFile(t, dir, "sur.json", `"\ud800"`)}, 2, "", "lone_surrogate"},
		{[]string{"evidence", "canon", filepath.Join(dir, "missing.json")}, 2, "", "no such file"},
		{[]string{"evidence", "digest"}, 2, "", "accepts 1 arg"},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, c.args...)
		if code != c.code || out != c.out || !strings.Contains(errs, c.err) {
			t.Errorf("%v: code %d out %q err %q; want %d %q %q", c.args, code, out, errs, c.code, c.out, c.err)
		}
		if c.code != 0 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: error is not one line: %q", c.args, errs)
		}
	}
}

func TestEvidenceStoreCommands(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "store")
	v := "healthy"
	b, d, err := evidence.Encode(evidence.Stamp(evidence.Record{
		Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: evidence.MaintainerLabMeasured,
		Subject: map[string]string{"artifact": "a"}, Claim: evidence.Claim{Quantity: "boot", Verdict: &v},
		Engine: evidence.Engine{Name: "vllm", Version: "0.29.0"}, Provenance: evidence.Provenance{Producer: "test"},
	}, ports.NewFake(time.Date(2026, 9, 10, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		t.Fatal(err)
	}
	rec := writeFile(t, dir, "rec.json", string(b))
	loose := writeFile(t, dir, "loose.json", string(b)+"\n")

	if code, out, errs := runCLI(t, "evidence", "add", "--store", st, rec); code != 0 || out != d+"\n" {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, "evidence", "add", "--store", st, loose); code != 2 || !strings.Contains(errs, "not_canonical") {
		t.Fatalf("add of non-canonical bytes: %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, "evidence", "show", "--store", st, d); code != 0 || out != string(b)+"\n" {
		t.Fatalf("show: %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "evidence", "ls", "--store", st); code != 0 || !strings.HasPrefix(out, d+"  boot") || !strings.Contains(out, "boot=healthy") {
		t.Fatalf("ls: %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "evidence", "release", "--store", st, "r1"); code != 0 || !canon.IsDigest(strings.TrimSpace(out)) {
		t.Fatalf("release: %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "evidence", "verify", st); code != 0 || !strings.Contains(out, "verified 2 files") {
		t.Fatalf("verify store: %d %q", code, out)
	}
	if code, _, _ := runCLI(t, "evidence", "verify", rec); code != 0 {
		t.Fatalf("verify canonical file: %d", code)
	}
	if code, _, errs := runCLI(t, "evidence", "verify", loose); code != 1 || !strings.Contains(errs, "not_canonical") {
		t.Fatalf("verify loose file: %d %q", code, errs)
	}
	// Tamper with the stored record: verify must fail and name the file.
	if err := os.WriteFile(filepath.Join(st, "records", d+".json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "evidence", "verify", st); code != 1 || !strings.Contains(errs, d) {
		t.Fatalf("verify tampered store: %d %q", code, errs)
	}
	if code, _, _ := runCLI(t, "evidence", "show", "--store", st, "nope"); code != 2 {
		t.Fatalf("show of a non-digest: %d", code)
	}
}
