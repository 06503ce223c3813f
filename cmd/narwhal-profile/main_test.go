package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

func quickProfile(iid string) profile.Row {
	r := simengine.DefaultProfile(iid)
	// Steps long against loopback HTTP and the race detector's overhead,
	// so the fits pass their limits on a busy machine.
	rs := 4e-3
	r.TTFTA, r.TTFTB, r.TTFTC = 1e-8, 1e-5, 0.05
	r.TPOTSlope, r.TPOTIntercept, r.TPOTRequestSlope = 8e-6, 0.03, &rs
	return r
}

// testFleet starts n simulated engines and writes a fleet file naming them.
func testFleet(t *testing.T, n int) (string, *fleet.Config, []*simengine.Engine) {
	t.Helper()
	dir := t.TempDir()
	cfg := fleet.Defaults()
	cfg.Model = "sim-model"
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.05}
	cfg.Profiles.Path = filepath.Join(dir, "profiles.json")
	var engines []*simengine.Engine
	for i := range n {
		iid := []string{"p0", "d0", "d1"}[i]
		e, err := simengine.Start(simengine.Config{Model: "sim-model", Profile: quickProfile(iid)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		role := fleet.Decode
		if i == 0 {
			role = fleet.Prefill
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: e.URL(), Role: role})
		engines = append(engines, e)
	}
	path := filepath.Join(dir, "fleet.json")
	if err := cfg.Save(path); err != nil {
		t.Fatal(err)
	}
	return path, &cfg, engines
}

var quick = []string{"--evidence-store", "", "--prefill-lengths", "256,1024,2048", "--decode-lengths", "256,1024", "--concurrency", "1,4", "--decode-tokens", "16"}

func profileCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Run(newRoot(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestProfileWritesALoadableStoreAndSamples(t *testing.T) {
	path, cfg, _ := testFleet(t, 2)
	evDir := filepath.Join(t.TempDir(), "evidence")
	code, out, errs := profileCmd(append(append([]string{"--fleet", path}, quick...), "--evidence-store", evDir)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "wrote 2 profile(s) to "+cfg.Profiles.Path) {
		t.Fatalf("no success line:\n%s", out)
	}
	st, err := profile.Load(cfg.Profiles.Path)
	if err != nil {
		t.Fatalf("the router's loader refuses the store: %v", err)
	}
	if err := st.Cover([]string{"p0", "d0"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Profiles {
		if probs := r.Problems(profile.Limits{MaxDecodeFitMAPE: 0.05, MaxDecodeCVMAPE: 0.13}); len(probs) > 0 {
			t.Fatalf("%s: %v", r.IID, probs)
		}
	}
	b, err := os.ReadFile(sweep.SamplesPath(cfg.Profiles.Path))
	if err != nil {
		t.Fatal(err)
	}
	var doc sweep.SamplesDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.Schema != sweep.SamplesSchema || len(doc.Engines) != 2 {
		t.Fatalf("samples file: %v %+v", err, doc.Schema)
	}
	if len(doc.Engines[0].Prefill) != 9 || len(doc.Engines[0].Decode) == 0 {
		t.Fatalf("samples lack raw measurements: %d prefill, %d intervals", len(doc.Engines[0].Prefill), len(doc.Engines[0].Decode))
	}
	recs, _ := filepath.Glob(filepath.Join(evDir, "records", "*.json"))
	if len(recs) != 2 || strings.Count(out, "workload record") != 2 {
		t.Fatalf("want one workload record per engine, got %d files:\n%s", len(recs), out)
	}
	rb, _ := os.ReadFile(recs[0])
	if !strings.Contains(string(rb), `"claim_scope":"serving_performance"`) || !strings.Contains(string(rb), `"kind":"workload"`) {
		t.Fatalf("record is not a serving_performance workload record: %s", rb)
	}
	if !strings.Contains(errs, "eta") {
		t.Fatalf("no progress on stderr:\n%s", errs)
	}
}

func TestProfileMergeAndFailureKeepTheStore(t *testing.T) {
	path, cfg, engines := testFleet(t, 2)
	if code, out, errs := profileCmd(append([]string{"--fleet", path}, quick...)...); code != 0 {
		t.Fatalf("first run exit %d: %s %s", code, out, errs)
	}
	before, _ := os.ReadFile(cfg.Profiles.Path)
	old, _ := profile.Load(cfg.Profiles.Path)
	oldP0, _ := old.Get("p0")

	// A dead engine: the run fails, the store stays byte for byte.
	_ = engines[1].SetFaults(simengine.Faults{Unhealthy: true})
	code, _, errs := profileCmd(append([]string{"--fleet", path, "--merge", "--engines", "d0"}, quick...)...)
	if code != 1 || !strings.Contains(errs, "d0: /health") {
		t.Fatalf("exit %d, stderr %s; want 1 naming d0's health", code, errs)
	}
	if after, _ := os.ReadFile(cfg.Profiles.Path); !bytes.Equal(before, after) {
		t.Fatal("a failed run changed the store")
	}

	// --merge of d0 alone keeps p0's row as it was.
	_ = engines[1].SetFaults(simengine.Faults{})
	engines[1].Restart()
	if code, out, errs := profileCmd(append([]string{"--fleet", path, "--merge", "--engines", "d0", "--format", "json"}, quick...)...); code != 0 {
		t.Fatalf("merge exit %d: %s %s", code, out, errs)
	} else if strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, `"engines":["d0"]`) {
		t.Fatalf("json mode stdout must be one envelope naming d0:\n%s", out)
	}
	st, err := profile.Load(cfg.Profiles.Path)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := st.Get("p0")
	d0, _ := st.Get("d0")
	oldD0, _ := old.Get("d0")
	if *p0.GenerationDigest != *oldP0.GenerationDigest || p0.TTFTC != oldP0.TTFTC {
		t.Fatal("--merge changed an engine it did not profile")
	}
	if *d0.GenerationDigest == *oldD0.GenerationDigest {
		t.Fatal("d0's row is not bound to its new generation")
	}
}

func TestProfileBadInputIsExit2(t *testing.T) {
	path, _, _ := testFleet(t, 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--fleet is required"},
		{[]string{"--fleet", path, "--engines", "zz"}, "zz is not an engine"},
		{[]string{"--fleet", path, "--prefill-repeats", "1"}, "--prefill-repeats must be ≥ 3"},
		{[]string{"--fleet", path, "--concurrency", "4"}, "--concurrency needs ≥ 2"},
		{[]string{"--fleet", path, "--decode-lengths", "512,x"}, "not a positive integer"},
		{[]string{"--fleet", filepath.Join(t.TempDir(), "none.json")}, "none.json"},
	} {
		code, out, errs := profileCmd(tc.args...)
		if code != 2 || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d, output %q; want 2 and %q", tc.args, code, out+errs, tc.want)
		}
	}
}

// --router waits for a running router to report the digest of the store
// just written, and fails when it does not take it (a router that does
// not re-read, or another profiles.path).
func TestProfileWaitsForTheRouterToTakeTheStore(t *testing.T) {
	path, cfg, _ := testFleet(t, 2)
	stale := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		digest := "sha256:old"
		if b, err := os.ReadFile(cfg.Profiles.Path); err == nil && !stale {
			digest = profile.FileDigest(b)
		}
		fmt.Fprintf(w, `{"schema":"narwhal.state","profiles":{"path":%q,"digest":%q,"error":"boom"}}`, cfg.Profiles.Path, digest)
	}))
	defer srv.Close()
	code, out, errs := profileCmd(append(append([]string{"--fleet", path}, quick...), "--router", srv.URL, "--router-wait", "5s", "--quiet")...)
	if code != 0 || !strings.Contains(out, "has taken the new profiles (digest sha256:") {
		t.Fatalf("a router that took the store: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if errs != "" {
		t.Fatalf("--quiet still wrote to stderr:\n%s", errs)
	}
	stale = true
	rc := awaitRouter(context.Background(), srv.URL, cfg.Profiles.Path, 300*time.Millisecond)
	if line := rc.line(300 * time.Millisecond); rc.Taken || !strings.Contains(line, `has not taken the new profiles within 300ms: it serves digest "sha256:old"`) ||
		!strings.Contains(line, "it says: boom") {
		t.Fatalf("a router that did not take it: %+v\n%s", rc, line)
	}
	if code, _, errs := profileCmd("--fleet", path, "--router", "127.0.0.1:8000"); code != 2 || !strings.Contains(errs, "want the router's base URL") {
		t.Errorf("a --router without a scheme: exit %d, %s", code, errs)
	}
}
