package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const queueCandidates = `{"schema":"narwhal.evidence.queue-input","schema_version":1,"engine_releases":["0.11.0"],"candidates":[
 {"source":"signal","name":"org/m","artifact":"1220cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","claim_scope":"boot","signals":[
   {"origin":"recipes","label":"recipe","value":1,"observed_at":"2026-09-02","attribution":"https://example.invalid/recipe"}]},
 {"source":"signal","name":"mirror/m","artifact":"1220cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","claim_scope":"boot","signals":[
   {"origin":"hf_downloads_30d","label":"","value":5,"observed_at":"2026-09-05","attribution":"https://example.invalid/hf"}]},
 {"source":"signal","name":"hyped/m","artifact":"1220dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd","claim_scope":"boot","signals":[
   {"origin":"hf_downloads_30d","label":"","value":9000000,"observed_at":"2026-09-05","attribution":"https://example.invalid/hf2"}]}]}`

// TestEvidenceQueue: a failed plan diagnosed into the store enters
// directly and first; signal candidates merge by artifact; downloads
// alone are held; every queued item says why it is where it is.
func TestEvidenceQueue(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "store")
	if code, _, errb := runCLI(t, "diagnose", "../../internal/diagnose/testdata/corpus/arch_v1.log", "--store", st); code != 0 {
		t.Fatalf("diagnose: %s", errb)
	}
	cands := writeFile(t, dir, "c.json", queueCandidates)
	code, out, errb := runCLI(t, "evidence", "--store", st, "queue", "--candidates", cands, "--format", "json")
	if code != 0 {
		t.Fatalf("queue: %d %s", code, errb)
	}
	var env struct {
		Data struct {
			Queued []struct {
				Sources []string `json:"sources"`
				Names   []string `json:"names"`
				Why     []string `json:"why"`
				AheadBy string   `json:"ahead_by"`
			} `json:"queued"`
			Held []struct {
				Names []string `json:"names"`
			} `json:"held"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	q := env.Data.Queued
	if len(q) != 2 || q[0].Sources[0] != "local_failed_plan" || len(q[1].Names) != 2 || q[0].AheadBy == "" || len(q[1].Why) == 0 {
		t.Fatalf("queued %+v", q)
	}
	if len(env.Data.Held) != 1 || env.Data.Held[0].Names[0] != "hyped/m" {
		t.Fatalf("held %+v", env.Data.Held)
	}
	code, out, _ = runCLI(t, "evidence", "--store", st, "queue", "--candidates", cands)
	if code != 0 || !strings.Contains(out, "ahead of #2 by unresolved failures") || !strings.Contains(out, "not eligible") {
		t.Fatalf("text: %s", out)
	}
	bad := writeFile(t, dir, "bad.json", strings.Replace(queueCandidates, `"observed_at":"2026-09-02",`, "", 1))
	if code, _, errb := runCLI(t, "evidence", "--store", st, "queue", "--candidates", bad); code != 2 || !strings.Contains(errb, "attributed and dated") {
		t.Fatalf("undated signal: %d %s", code, errb)
	}
}

// The queue reads accepted requests from the store: a signed acceptance
// enters directly with no candidates file; an unsigned one does not.
func TestEvidenceQueueReadsAcceptedRequestsFromTheStore(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "store")
	art := "1220" + strings.Repeat("cd", 32)
	req := writeFile(t, dir, "request.json", strings.Replace(e2eRequest, `"artifact_policy":{"artifact":""}`, `"artifact_policy":{"artifact":"`+art+`"}`, 1))
	code, out, errb := runCLI(t, "evidence", "propose", req, "--principal", "ai_agent:planner", "--store", st, "--format", "json")
	if code != 0 {
		t.Fatalf("propose: %d %s", code, errb)
	}
	rev := out[strings.Index(out, `"revision":"`)+12:]
	rev = rev[:strings.Index(rev, `"`)]
	queued := func() string {
		code, out, errb := runCLI(t, "evidence", "--store", st, "queue", "--format", "json")
		if code != 0 {
			t.Fatalf("queue: %d %s", code, errb)
		}
		return out
	}
	if strings.Contains(queued(), "accepted_request") {
		t.Fatal("a proposed, unaccepted request was queued")
	}
	key := filepath.Join(dir, "op.key")
	for _, args := range [][]string{{"evidence", "keygen", "--out", key}, {"evidence", "keys", "add", "--principal", "human:op", key + ".pub", "--store", st},
		{"evidence", "accept", rev, "--principal", "human:op", "--key", key, "--store", st}} {
		if code, _, errb := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errb)
		}
	}
	if q := queued(); !strings.Contains(q, "accepted_request") || !strings.Contains(q, "no measured serving_performance record") {
		t.Fatalf("the accepted request is not queued from the store:\n%s", q)
	}
}
