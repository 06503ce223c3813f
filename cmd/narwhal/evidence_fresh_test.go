package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// A boot at 0.21.0 is fresh until a later minor is released: the release
// index is data (imported), judged as of --as-of, and `stale` says why.
func TestStaleAfterImportedRelease(t *testing.T) {
	dir := t.TempDir()
	st := dir + "/ev"
	healthy := evidence.VerdictHealthy
	r := evidence.Stamp(evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured, Subject: map[string]string{evidence.SubjectEndpoint: "fp"},
		Claim: evidence.Claim{Quantity: "boot", Verdict: &healthy}, Engine: evidence.Engine{Name: "vllm", Version: "0.21.0", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: map[string]any{"engine_iid": "e0"}},
		ports.NewFake(time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)))
	d, err := store.Open(st).PutRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	fleetPath := writeFile(t, dir, "fleet.json", `{"schema":"narwhal.fleet","schema_version":1,"model":"m","slo":{"ttft_s":1,"tpot_s":0.1},
"engines":[{"iid":"e0","url":"http://127.0.0.1:1","role":"decode"}]}`)
	index := writeFile(t, dir, "releases.json", `{"schema":"narwhal.vllm-releases","schema_version":1,"source":"test",
"releases":[{"version":"0.21.0","date":"2026-01-01"},{"version":"0.22.0","date":"2026-02-01"}]}`)
	if code, out, errb := runCLI(t, "evidence", "releases", "import", index, "--store", st); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errb)
	}
	_, before, _ := runCLI(t, "evidence", "stale", "--fleet", fleetPath, "--store", st, "--as-of", "2026-01-20")
	if strings.Contains(before, d) {
		t.Fatalf("before 0.22.0 was released the boot is listed stale:\n%s", before)
	}
	_, after, _ := runCLI(t, "evidence", "stale", "--fleet", fleetPath, "--store", st, "--as-of", "2026-02-02")
	if !strings.Contains(after, d) || !strings.Contains(after, "vllm 0.22.0 released") {
		t.Fatalf("after 0.22.0 the boot is not stale with its reason:\n%s", after)
	}
}

// --cases embeds a JSONL file of cases in the suite revision; an agent
// cannot accept it.
func TestProposeSuiteWithCases(t *testing.T) {
	dir := t.TempDir()
	st := dir + "/ev"
	suite := writeFile(t, dir, "suite.json", `{"schema":"narwhal.task-suite","schema_version":1,"name":"capitals","model":"m","kind":"cases","quality_floor":0.5,"cases":[]}`)
	cases := writeFile(t, dir, "cases.jsonl", `{"id":"fr","prompt":"Capital of France?","max_tokens":4,"scorer":"contains","expected":"Paris","schema":null}
{"id":"re","prompt":"Two plus two?","max_tokens":4,"scorer":"regex","expected":"\\b4\\b","schema":null}
`)
	code, out, errb := runCLI(t, "evidence", "propose", suite, "--cases", cases, "--principal", "ai_agent:planner", "--store", st, "--format", "json")
	if code != 0 || !strings.Contains(out, `"kind":"task_suite"`) {
		t.Fatalf("propose: exit %d\n%s\n%s", code, out, errb)
	}
	rev := out[strings.Index(out, `"revision":"`)+12:]
	rev = rev[:strings.Index(rev, `"`)]
	if code, _, errb := runCLI(t, "evidence", "accept", rev, "--principal", "ai_agent:other", "--store", st); code != 1 || !strings.Contains(errb, "may not accept") {
		t.Fatalf("an agent accepted: exit %d %s", code, errb)
	}
	b, err := store.Open(st).GetDocument(rev)
	if err != nil || !strings.Contains(string(b), "Capital of France?") {
		t.Fatalf("the revision does not hold the embedded cases: %v\n%s", err, b)
	}
}

// advisories import reads OSV into the store's index, an advisory once
// however often it is imported; a file that is not OSV is bad input.
func TestEvidenceAdvisoriesImport(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "evidence")
	osvFile := writeFile(t, dir, "osv.json", `{"vulns":[{"id":"GHSA-test-0001","modified":"2026-11-30T00:00:00Z",
"affected":[{"package":{"ecosystem":"PyPI","name":"vllm"},"versions":["0.21.0"]}]}]}`)
	for range 2 {
		if code, out, errb := runCLI(t, "evidence", "advisories", "import", osvFile, "--store", st); code != 0 || !strings.Contains(out, "the index holds 1") {
			t.Fatalf("import: exit %d\n%s\n%s", code, out, errb)
		}
	}
	advs, err := store.Open(st).Advisories()
	if err != nil || len(advs) != 1 || advs[0].Affects[0] != "vllm@0.21.0" {
		t.Fatalf("index %+v, err %v", advs, err)
	}
	bad := writeFile(t, dir, "bad.json", `{"modified":"x"}`)
	if code, _, errb := runCLI(t, "evidence", "advisories", "import", bad, "--store", st); code != 2 || !strings.Contains(errb, "id and modified are required") {
		t.Fatalf("a record without an id: exit %d %s", code, errb)
	}
}
