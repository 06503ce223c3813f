package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/devfleet"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// chain is one end-to-end run on the dev fleet: its files and clock.
type chain struct {
	t         *testing.T
	dir, st   string
	fleetPath string
	base      string
	engines   *simengine.Fleet
	at        time.Time // the evidence clock: every step moves it on
	planD     string
	stop      func()
}

func (c *chain) step() string {
	c.at = c.at.Add(time.Second)
	return c.at.Format(time.RFC3339)
}

// cli runs `narwhal evidence ARGS --store S --as-of T` and returns the
// JSON envelope's data; want is the expected exit code.
func (c *chain) cli(want int, args ...string) map[string]any {
	c.t.Helper()
	full := append([]string{"evidence"}, args...)
	full = append(full, "--store", c.st, "--as-of", c.step(), "--format", "json")
	code, out, errb := runCLI(c.t, full...)
	if code != want {
		c.t.Fatalf("narwhal %s: exit %d, want %d\n%s\n%s", strings.Join(full, " "), code, want, out, errb)
	}
	if want != 0 {
		return map[string]any{"stderr": errb, "stdout": out}
	}
	var env struct {
		Data   map[string]any   `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		c.t.Fatalf("narwhal %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return env.Data
}

func startChain(t *testing.T) *chain {
	dir := t.TempDir()
	c := &chain{t: t, dir: dir, st: filepath.Join(dir, "evidence"), at: time.Now().UTC().Truncate(time.Second).Add(time.Minute)}
	// make run's fleet: two prefill and two decode engines of one build,
	// so one execution fingerprint and replicas that sit idle.
	run, err := devfleet.Start(devfleet.Options{Dir: dir, Engines: 4,
		OnEngines: func(f *simengine.Fleet) { c.engines = f }}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("dev fleet: %v", err)
	}
	c.base = run.Base
	c.stop = func() { _ = run.Stop() }
	c.fleetPath = filepath.Join(dir, "fleet.json")
	return c
}

// preflight runs narwhal-check's gates and stores its records bound to
// the plan, as `narwhal-check --plan D` does.
func (c *chain) preflight() []check.EngineEvidence {
	c.t.Helper()
	cfg, err := fleet.Load(c.fleetPath)
	if err != nil {
		c.t.Fatal(err)
	}
	profiles, perr := profile.Load(cfg.Profiles.Path)
	rep := check.Run(context.Background(), check.Options{Fleet: cfg, Profiles: profiles, ProfilesErr: perr, PaceWords: 64, ProbeWords: 16})
	st := store.Open(c.st)
	plan, _, err := st.Get(c.planD)
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := check.BindingFromPlan(plan, c.planD)
	if err != nil {
		c.t.Fatal(err)
	}
	c.step()
	ee, err := check.EvidenceBound(rep, cfg, b, ports.NewFake(c.at), "test")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range ee {
		for _, r := range e.Records {
			if _, err := st.PutRecord(r); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	return ee
}

// traffic sends n tiny greedy completions through the router.
func (c *chain) traffic(n int) {
	c.t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"model":"narwhal/sim-llama-3-8b","prompt":"evidence request %d","max_tokens":4,"temperature":0}`, i)
		resp, err := http.Post(c.base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			c.t.Fatalf("request %d: HTTP %d", i, resp.StatusCode)
		}
	}
}

func tierOf(t *testing.T, data map[string]any, engine string) map[string]any {
	t.Helper()
	eps, _ := data["endpoints"].([]any)
	for _, e := range eps {
		if m := e.(map[string]any); m["engine"] == engine {
			return m
		}
	}
	t.Fatalf("no endpoint %s in %v", engine, data)
	return nil
}

func strs(v any) []string {
	var out []string
	xs, _ := v.([]any) // nil for a key a record does not have
	for _, x := range xs {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// manifested writes a SHA256SUMS for the fixture's weight files, as a
// download tool does, so the plan resolves an artifact identity without
// reading gigabytes of (sparse) weights.
func manifested(t *testing.T, dir string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var sums strings.Builder
	for _, n := range names {
		h := sha256.Sum256([]byte(filepath.Base(n)))
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(h[:]), filepath.Base(n))
	}
	writeFile(t, dir, "SHA256SUMS", sums.String())
	return dir
}

const e2eRequest = `{"schema":"narwhal.decision-request","schema_version":1,"model":"narwhal/sim-llama-3-8b","objective":"max_goodput",
"slo":{"ttft_s":1.0,"tpot_s":0.05,"attainment":0.8},
"workload":{"max_input_tokens":4096,"max_output_tokens":256,"max_rate_per_s":100,"min_samples":20},
"artifact_policy":{"artifact":""}}`

// TestEvidenceChainOnDevFleet walks the whole chain on the dev fleet:
// plan → candidate; preflight → conservative; an accepted DecisionRequest
// and P/D-equivalence suite, served traffic meeting the SLO and a task
// run → recommended_endpoint. A self-acceptance is refused and an
// unaccepted request drives nothing. Then a community record disagreeing
// with a lab record makes the key contested (both shown, no promotion),
// and restarting one engine as another vLLM version drops its tier with
// "fingerprint changed" while its old records stay on the old fingerprint.
func TestEvidenceChainOnDevFleet(t *testing.T) {
	c := startChain(t)
	defer c.stop()
	code, out, errb := runCLI(t, "plan", "--model-dir", manifested(t, llamaDir(t)), "--gpu", "h100-sxm", "--max-model-len", "8192",
		"--store", c.st, "--format", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errb)
	}
	var plan struct {
		Data struct{ Record string } `json:"data"`
	}
	_ = json.Unmarshal([]byte(out), &plan)
	c.planD = plan.Data.Record

	if got := tierOf(t, c.cli(0, "tier", "--fleet", c.fleetPath, "--plan", c.planD), "p0")["tier"]; got != "candidate" {
		t.Fatalf("after plan: tier %v, want candidate", got)
	}
	c.preflight()
	if got := tierOf(t, c.cli(0, "tier", "--fleet", c.fleetPath), "p0"); got["tier"] != "conservative" {
		t.Fatalf("after preflight: tier %v, want conservative (missing %v, notes %v)", got["tier"], got["missing_text"], got["notes"])
	}
	reqD, suiteD := c.acceptance()
	c.traffic(24)
	c.cli(0, "task-run", "--suite", suiteD, "--router", c.base, "--fleet", c.fleetPath)
	cfg, _ := fleet.Load(c.fleetPath)
	fj := c.cli(0, "from-journal", cfg.JournalPath(), "--fleet", c.fleetPath, "--request", reqD)
	// p0 and d0 run one build on one contract: one execution fingerprint,
	// so one serving record naming both replicas.
	if recs := fj["records"].([]any); len(recs) != 1 || !strings.HasPrefix(fmt.Sprint(recs[0].(map[string]any)["engines"]), "[d0") {
		t.Fatalf("from-journal wrote %v, want one record for the fingerprint p0 and d0 share: %v", recs, fj)
	}
	for _, r := range fj["records"].([]any) {
		if v := r.(map[string]any)["verdict"]; v != evidence.VerdictMeetsSLO {
			t.Fatalf("served traffic: serving verdict %v, want meets_slo: %v", v, fj)
		}
	}
	c.tornRowIsCounted(cfg.JournalPath(), reqD)
	asOf := c.step()
	tiers := c.tierAt(asOf)
	for _, e := range []string{"p0", "p1", "d0", "d1"} { // p1 and d1 are replicas of the fingerprint p0 and d0 served on
		if got := tierOf(t, tiers, e); got["tier"] != "recommended_endpoint" {
			t.Fatalf("%s: tier %v, want recommended_endpoint (missing %v, notes %v)", e, got["tier"], got["missing_text"], got["notes"])
		}
	}
	c.checkDeterministic(asOf)
	_, text, _ := runCLI(t, "evidence", "tier", "--fleet", c.fleetPath, "--store", c.st, "--as-of", asOf)
	t.Logf("tier at recommended:\n%s", text)
	c.contested()
	c.restartAsOtherVersion(tiers)
	_, text, _ = runCLI(t, "evidence", "tier", "--fleet", c.fleetPath, "--store", c.st, "--as-of", c.step())
	t.Logf("tier after the contested report and the restart:\n%s", text)
}

// tornRowIsCounted appends a torn row (half a row whose line the next
// writer ended) and checks from-journal reads on past it and says so.
func (c *chain) tornRowIsCounted(path, reqD string) {
	t := c.t
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"schema":"narwhal.journal","schema_version":1,"rid":"half` + "\n")
	f.Close()
	fj := c.cli(0, "from-journal", path, "--fleet", c.fleetPath, "--request", reqD)
	notes := fmt.Sprint(fj["notes"])
	if n := len(fj["records"].([]any)); n != 1 || !strings.Contains(notes, "1 torn row(s) skipped") {
		t.Fatalf("after a torn row: %d records, notes %s; want the same record and the torn row said", n, notes)
	}
}

// acceptance proposes the request and the shipped suite as an agent,
// shows that nothing consumes them unaccepted and that the proposer
// cannot accept, then accepts both as a human.
func (c *chain) acceptance() (string, string) {
	t := c.t
	reqFile := writeFile(t, c.dir, "request.json", e2eRequest)
	reqD := c.cli(0, "propose", reqFile, "--principal", "ai_agent:planner")["revision"].(string)
	suiteD := c.cli(0, "propose", "--builtin", "pd-equivalence", "--principal", "ai_agent:planner")["revision"].(string)
	cfg, _ := fleet.Load(c.fleetPath)
	refused := c.cli(1, "from-journal", cfg.JournalPath(), "--fleet", c.fleetPath, "--request", reqD)
	if !strings.Contains(refused["stderr"].(string), "proposed but not accepted") || !strings.Contains(refused["stdout"].(string)+refused["stderr"].(string), reqD) {
		t.Fatalf("an unaccepted request was consumed or the error does not name it: %v", refused)
	}
	self := c.cli(1, "accept", reqD, "--principal", "ai_agent:planner")
	if !strings.Contains(self["stderr"].(string)+self["stdout"].(string), "cannot accept its own proposal") {
		t.Fatalf("self-acceptance not refused as such: %v", self)
	}
	// An acceptance counts only when signed by a key registered for its
	// principal: without --key it is refused before anything is written,
	// with an unregistered key likewise.
	key := filepath.Join(c.dir, "operator.key")
	if code, _, errb := runCLI(t, "evidence", "keygen", "--out", key); code != 0 {
		t.Fatalf("keygen: exit %d %s", code, errb)
	}
	if none := c.cli(2, "accept", reqD, "--principal", "human:operator"); !strings.Contains(fmt.Sprint(none), "--key is required") {
		t.Fatalf("an acceptance without a key: %v", none)
	}
	if unreg := c.cli(2, "accept", reqD, "--principal", "human:operator", "--key", key); !strings.Contains(fmt.Sprint(unreg), "is not registered for human:operator") {
		t.Fatalf("an acceptance with an unregistered key: %v", unreg)
	}
	c.cli(0, "keys", "add", "--principal", "human:operator", key+".pub")
	c.cli(0, "accept", reqD, "--principal", "human:operator", "--key", key)
	c.cli(0, "accept", suiteD, "--principal", "human:operator", "--key", key)
	return reqD, suiteD
}

func (c *chain) tierAt(asOf string) map[string]any {
	c.t.Helper()
	code, out, errb := runCLI(c.t, "evidence", "tier", "--fleet", c.fleetPath, "--store", c.st, "--as-of", asOf, "--format", "json")
	if code != 0 {
		c.t.Fatalf("tier: exit %d\n%s\n%s", code, out, errb)
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		c.t.Fatal(err)
	}
	return env.Data
}

// checkDeterministic: the same store and the same --as-of give
// byte-identical tier decisions, in JSON and in text.
func (c *chain) checkDeterministic(asOf string) {
	for _, format := range []string{"json", "text"} {
		args := []string{"evidence", "tier", "--fleet", c.fleetPath, "--store", c.st, "--as-of", asOf, "--format", format}
		_, a, _ := runCLI(c.t, args...)
		_, b, _ := runCLI(c.t, args...)
		if a != b || a == "" {
			c.t.Fatalf("tier --format %s twice with --as-of %s differs:\n%s\n---\n%s", format, asOf, a, b)
		}
	}
}

// contested adds a community-level boot report that disagrees with the
// lab's boot record of d0: the key is contested, both records are shown,
// and d0 is not promoted. (p0 and d0 run the same build, so they share
// the execution fingerprint and the report contests both.)
func (c *chain) contested() {
	t := c.t
	st := store.Open(c.st)
	rs, _ := st.Records()
	lab, ok := tierd.Current(rs, "d0")
	if !ok {
		t.Fatal("d0 has no boot record")
	}
	failed := evidence.VerdictFailed
	r := evidence.Stamp(evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.CommunityReported, Subject: lab.Record.Subject, Claim: evidence.Claim{Quantity: "boot", Verdict: &failed},
		Engine: lab.Record.Engine, Provenance: evidence.Provenance{Producer: "community report", ProducerVersion: "1", Inputs: []string{}},
		Display: map[string]any{}}, ports.NewFake(c.at))
	b, _, err := evidence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	added := c.cli(0, "add", writeFile(t, c.dir, "community.json", string(b)))["record"].(string)
	d0 := tierOf(t, c.tierAt(c.step()), "d0")
	if d0["tier"] == "recommended_endpoint" || !slices.Contains(strs(d0["missing"]), string(evidence.NeedUncontested)) {
		t.Fatalf("contested d0: tier %v missing %v, want no promotion and evidence_contested", d0["tier"], d0["missing"])
	}
	shown := strs(d0["contested"].([]any)[0].(map[string]any)["records"])
	if !slices.Contains(shown, added) || !slices.Contains(shown, lab.Digest) {
		t.Fatalf("contested key shows %v, want both %s and %s", shown, added, lab.Digest)
	}
	ls := c.cli(0, "ls")
	for _, row := range ls["records"].([]any) {
		m := row.(map[string]any)
		if m["digest"] == added && m["contested"] != true {
			t.Fatalf("ls does not mark the community record contested: %v", m)
		}
	}
	show := c.cli(0, "show", added)
	if _, ok := show["contested_with"].(map[string]any)[lab.Digest]; !ok {
		t.Fatalf("show does not show the lab record beside the community one: %v", show)
	}
}

// restartAsOtherVersion restarts p0 as vLLM 0.22.0 and re-runs preflight:
// p0's tier drops with "fingerprint changed"; its serving and task
// records stay on the old fingerprint.
func (c *chain) restartAsOtherVersion(before map[string]any) {
	t := c.t
	oldFP := tierOf(t, before, "p0")["endpoint"].(string)
	id := c.engines.Engines[0].Compat()
	id.VLLMVersion = "0.22.0"
	c.engines.Engines[0].RestartAs(id)
	c.preflight()
	p0 := tierOf(t, c.tierAt(c.step()), "p0")
	if p0["tier"] == "recommended_endpoint" || p0["endpoint"] == oldFP {
		t.Fatalf("after the restart: tier %v endpoint %v, want a drop to a new fingerprint", p0["tier"], p0["endpoint"])
	}
	if !slices.Contains(strs(p0["missing"]), string(evidence.NeedSameFingerprint)) || !strings.Contains(strings.Join(strs(p0["notes"]), " "), "fingerprint changed") {
		t.Fatalf("the drop does not say why: missing %v notes %v", p0["missing"], p0["notes"])
	}
	rs, _ := store.Open(c.st).Records()
	tied := 0
	for _, s := range rs {
		// A task record is p0's own; a serving record is its fingerprint's,
		// whichever replicas served it (under load p1 may have taken p0's
		// share).
		ofP0 := s.Record.Kind == evidence.KindTask && s.Record.Display["engine_iid"] == "p0" ||
			s.Record.Kind == evidence.KindWorkload && (slices.Contains(strs(s.Record.Display["engine_iids"]), "p0") ||
				s.Record.Subject[evidence.SubjectEndpoint] == oldFP)
		if ofP0 {
			if s.Record.Subject[evidence.SubjectEndpoint] != oldFP {
				t.Fatalf("record %s of p0 moved off the old fingerprint", s.Digest)
			}
			tied++
		}
	}
	if tied < 2 {
		var seen []string
		for _, s := range rs {
			if k := s.Record.Kind; k == evidence.KindWorkload || k == evidence.KindTask {
				seen = append(seen, fmt.Sprintf("%s %s %v%v", k, shortDigest(s.Record.Subject[evidence.SubjectEndpoint]), s.Record.Display["engine_iid"], s.Record.Display["engine_iids"]))
			}
		}
		t.Fatalf("%d serving/task records of p0 on the old fingerprint %s, want them kept; serving and task records: %v", tied, shortDigest(oldFP), seen)
	}
}
