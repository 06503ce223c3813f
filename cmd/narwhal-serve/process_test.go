package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// These tests run the real narwhal-serve binary as a process: what an
// operator's supervisor starts, signals and kills.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "narwhal-serve-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "narwhal-serve")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build narwhal-serve: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// world is simulated engines plus a fleet directory for router processes.
type world struct {
	t       *testing.T
	engines *simengine.Fleet
	dir     string
	fleet   string
}

func newWorld(t *testing.T, mod func(*fleet.Config)) *world {
	t.Helper()
	fl, err := simengine.StartFleet(4, simengine.Config{Model: "m", Profile: simengine.DefaultProfile("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	w := &world{t: t, engines: fl, dir: t.TempDir()}
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 2, TPOT: 0.1}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i, u := range fl.URLs() {
		iid, role := fmt.Sprintf("p%d", i), fleet.Prefill
		if i >= 2 {
			iid, role = fmt.Sprintf("d%d", i-2), fleet.Decode
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
		store.Profiles = append(store.Profiles, simengine.DefaultProfile(iid))
	}
	cfg.Profiles.Path = filepath.Join(w.dir, "profiles.json")
	cfg.Recovery.StatePath = filepath.Join(w.dir, "state.json")
	cfg.Controller.MonitorIntervalS = 0.1
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate("test"); err != nil {
		t.Fatal(err)
	}
	w.fleet = filepath.Join(w.dir, "fleet.json")
	if err := cfg.Save(w.fleet); err != nil {
		t.Fatal(err)
	}
	if err := profile.Save(cfg.Profiles.Path, store); err != nil {
		t.Fatal(err)
	}
	return w
}

// proc is one narwhal-serve process.
type proc struct {
	cmd  *exec.Cmd
	base string
	errb *testkit.SyncBuffer
	done chan error
	// exited is closed once Wait returned: the cleanup reads it, not
	// cmd.ProcessState, which Wait writes on its own goroutine.
	exited chan struct{}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs narwhal-serve with args and waits until /health answers.
func (w *world) start(port int, args ...string) *proc {
	w.t.Helper()
	all := append([]string{"--fleet", w.fleet, "--port", fmt.Sprint(port)}, args...)
	cmd := exec.Command(binary, all...)
	r := &proc{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), errb: &testkit.SyncBuffer{}, done: make(chan error, 1),
		exited: make(chan struct{})}
	cmd.Stderr = r.errb
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait(); close(r.exited) }()
	w.t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			cmd.Process.Kill()
			<-r.exited
		}
	})
	for i := 0; i < 500; i++ {
		if resp, err := http.Get(r.base + "/health"); err == nil {
			resp.Body.Close()
			return r
		}
		select {
		case err := <-r.done:
			w.t.Fatalf("narwhal-serve exited at start: %v\n%s", err, r.errb.String())
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("narwhal-serve did not come up:\n%s", r.errb.String())
	return nil
}

// wait returns the process's exit code within 30 s.
func (r *proc) wait(t *testing.T) int {
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("narwhal-serve did not exit:\n%s", r.errb.String())
	}
	return -1
}

// stream sends a streaming completion and returns its body and rid.
func stream(ctx context.Context, base string, tokens int) (string, string, error) {
	return streamStarted(ctx, base, tokens, nil)
}

// streamStarted is stream that also sends on started (when not nil) once
// the response headers are in: the router has admitted the request.
func streamStarted(ctx context.Context, base string, tokens int, started chan<- struct{}) (string, string, error) {
	body := fmt.Sprintf(`{"prompt":"hello","max_tokens":%d,"stream":true}`, tokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if started != nil {
		started <- struct{}{}
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.Header.Get("X-Request-Id"), err
}

func TestSIGTERMUnderLoadLetsStreamsFinish(t *testing.T) {
	w := newWorld(t, nil)
	r := w.start(freePort(t))
	type result struct {
		body, rid string
		err       error
	}
	results := make(chan result, 4)
	started := make(chan struct{}, 4)
	for i := 0; i < 4; i++ {
		go func() {
			b, rid, err := streamStarted(context.Background(), r.base, 60, started) // ~0.8 s of decode
			results <- result{b, rid, err}
		}()
	}
	for range 4 { // every stream has its headers: admitted and in flight
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("streams did not start within 10 s")
		}
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rids := map[string]bool{}
	for i := 0; i < 4; i++ {
		res := <-results
		if res.err != nil || !strings.Contains(res.body, "data: [DONE]") {
			t.Errorf("stream %d was cut by the shutdown: %v\n%.200s", i, res.err, res.body)
		}
		rids[res.rid] = true
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, r.errb.String())
	}
	j, err := journal.ReadFile(filepath.Join(w.dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	counts := journal.Terminals(j.Requests)
	for rid := range rids {
		if counts[rid] != 1 {
			t.Errorf("request %s has %d terminal rows, want 1", rid, counts[rid])
		}
	}
}

// readState fetches a JSON route.
func readJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(bufio.NewReader(resp.Body)).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestSIGKILLThenResumeRestoresLifecycleAndCounters(t *testing.T) {
	w := newWorld(t, nil)
	port := freePort(t)
	a := w.start(port)
	// Hold d1 out (no contract: it stays blocked with missing-contract) and
	// serve some traffic so there are counters to carry over.
	resp, err := http.Post(a.base+"/narwhal/lifecycle/drain", "application/json", strings.NewReader(`{"iid":"d1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i := 0; i < 3; i++ {
		if _, _, err := stream(context.Background(), a.base, 4); err != nil {
			t.Fatal(err)
		}
	}
	// Streams in flight when the router is killed.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	openStreams(t, ctx, a.base, 3)
	waitHandoff(t, w, func(c state.Counters) bool { return c.Served >= 3 && c.Offered >= 6 }) // a monitor pass wrote them
	a.cmd.Process.Kill()
	a.wait(t)

	b := w.start(port, "--resume")
	var lc struct {
		Engines map[string]struct {
			State      string `json:"state"`
			AcceptsNew bool   `json:"accepts_new"`
			Checks     []struct{ Name string }
		} `json:"engines"`
	}
	readJSON(t, b.base+"/narwhal/lifecycle", &lc)
	d1 := lc.Engines["d1"]
	if d1.State != "blocked" || d1.AcceptsNew || len(d1.Checks) == 0 || d1.Checks[0].Name != "missing-contract" {
		t.Errorf("d1 after resume: %+v; want still held out with missing-contract", d1)
	}
	var st struct {
		Offered int `json:"offered"`
		Served  int `json:"served"`
	}
	readJSON(t, b.base+"/narwhal/state", &st)
	if st.Served < 3 || st.Offered < 3 {
		t.Errorf("counters after resume: %+v; want at least the 3 served before the kill", st)
	}
	if out, _, err := stream(context.Background(), b.base, 4); err != nil || !strings.Contains(out, "[DONE]") {
		t.Errorf("the resumed router does not serve: %v %.200s", err, out)
	}
}

func TestResumeRefusesADamagedStateFile(t *testing.T) {
	w := newWorld(t, nil)
	if err := os.WriteFile(filepath.Join(w.dir, "state.json"), []byte(`{"schema":"narwhal.handoff","schema_version":1,`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--fleet", w.fleet, "--port", "0", "--resume")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "state.json") || !strings.Contains(string(out), "move the file aside") {
		t.Fatalf("exit %d (%v), want 2 and a message naming the file and the fix:\n%s", cmd.ProcessState.ExitCode(), err, out)
	}
}

func ready(base string) bool {
	resp, err := http.Get(base + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func TestStandbyTakesOverAndTheOldPrimaryStaysFenced(t *testing.T) {
	w := newWorld(t, nil)
	lease := filepath.Join(w.dir, "router.lease")
	leaseArgs := []string{"--lease-path", lease, "--lease-ttl", "2s", "--lease-renew-interval", "500ms", "--lease-safety-margin", "500ms"}
	portA := freePort(t)
	a := w.start(portA, append(leaseArgs, "--router-id", "a")...)
	if !ready(a.base) {
		t.Fatal("primary not ready")
	}
	b := w.start(freePort(t), append(leaseArgs, "--router-id", "b", "--standby-of", a.base)...)
	waitWarm(t, b, 3) // a few good probes: the standby holds a document and still does not serve
	if ready(b.base) {
		t.Fatal("the standby is ready while the primary serves")
	}
	resp, _ := http.Post(b.base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if resp.StatusCode != 503 {
		t.Errorf("standby served a completion: %d", resp.StatusCode)
	}
	resp.Body.Close()

	a.cmd.Process.Kill()
	a.wait(t)
	killed := time.Now()
	for !ready(b.base) {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("no takeover within 10 s:\n%s", b.errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("takeover after %v (lease ttl 2s)", took)
	if took > 4*time.Second {
		t.Errorf("takeover took %v, more than two lease periods (4 s)", took)
	}
	if out, _, err := stream(context.Background(), b.base, 4); err != nil || !strings.Contains(out, "[DONE]") {
		t.Errorf("the new primary does not serve: %v %.200s", err, out)
	}

	// The old primary comes back: the lease is held by b, so it must not serve.
	// Its claim at start is refused before it serves /health (Start runs
	// before the listener is served), so its reason already says so.
	a2 := w.start(portA, append(leaseArgs, "--router-id", "a")...)
	if rd := readyDoc(t, a2.base); rd.Status == "ready" || !strings.Contains(rd.Reason, "lease held by another router") {
		t.Fatalf("the returning old primary: /ready %+v; want not ready, its claim refused while the new one holds the lease", rd)
	}
	resp, _ = http.Post(a2.base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if resp.StatusCode != 503 {
		t.Errorf("the old primary served a completion: %d", resp.StatusCode)
	}
	resp.Body.Close()
	var h struct{ Status string }
	readJSON(t, a2.base+"/health", &h)
	if h.Status != "fenced" {
		t.Errorf("old primary /health status %q, want fenced", h.Status)
	}
}

// readyDoc is /ready's document, whatever its status code.
func readyDoc(t *testing.T, base string) routerdoc.Ready {
	t.Helper()
	var rd routerdoc.Ready
	readJSON(t, base+"/ready", &rd)
	return rd
}

// waitWarm waits (up to 10 s) until the standby p has had n good probes
// of its primary, each one a handoff document it could take over with.
func waitWarm(t *testing.T, p *proc, n int64) {
	t.Helper()
	until(t, 10*time.Second, fmt.Sprintf("%d good probes by the standby at %s", n, p.base), func() bool {
		rd := readyDoc(t, p.base)
		return rd.Standby != nil && rd.Standby.GoodProbes >= n
	})
}

// waitHandoff waits (up to 10 s) until the handoff document the routers
// of w write has counters that satisfy ok.
func waitHandoff(t *testing.T, w *world, ok func(state.Counters) bool) {
	t.Helper()
	path := filepath.Join(w.dir, "state.json")
	until(t, 10*time.Second, "the counters wanted in the handoff at "+path, func() bool {
		doc, err := state.Read(path)
		return err == nil && ok(doc.Counters)
	})
}

// until polls cond every 20 ms and fails the test with what if it does
// not hold within d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openStream starts a streaming completion and returns its router rid
// once the first bytes arrived; the body keeps streaming until ctx ends.
func openStream(ctx context.Context, base string, tokens int) (string, error) {
	body := fmt.Sprintf(`{"prompt":"hello","max_tokens":%d,"stream":true}`, tokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Request-Id"), nil
}

// A router killed with requests in flight leaves them open in the journal;
// the router that resumes closes each with one router_lost row, and its
// counters add up: offered equals the sum of the outcomes.
func TestSIGKILLClosesEveryAdmittedRequest(t *testing.T) {
	w := newWorld(t, nil)
	port := freePort(t)
	a := w.start(port)
	for i := 0; i < 3; i++ {
		if _, _, err := stream(context.Background(), a.base, 4); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const inflight = 6
	var rids []string
	for i := 0; i < inflight; i++ {
		rid, err := openStream(ctx, a.base, 400) // seconds of decode: still running at the kill
		if err != nil || rid == "" {
			t.Fatalf("stream %d: %v (rid %q)", i, err, rid)
		}
		rids = append(rids, rid)
	}
	waitHandoff(t, w, func(c state.Counters) bool { return c.Offered >= 3+inflight }) // a monitor pass wrote these in flight
	a.cmd.Process.Kill()
	a.wait(t)
	cancel()

	b := w.start(port, "--resume")
	j, err := journal.ReadFile(filepath.Join(w.dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]*journal.RequestRow{}
	for _, rec := range j.Requests {
		rows[rec.Request.RID] = append(rows[rec.Request.RID], rec.Request)
	}
	for _, rid := range rids {
		got := rows[rid]
		if len(got) != 1 || got[0].Reason == nil || *got[0].Reason != string(fault.RouterLost) || got[0].Terminal != journal.TerminalFailed {
			t.Errorf("request %s in flight at the kill has rows %+v; want exactly one failed router_lost row", rid, got)
		}
	}
	for _, rec := range j.Admissions {
		if n := len(rows[rec.Admission.RID]); n != 1 {
			t.Errorf("admitted request %s has %d terminal rows, want 1", rec.Admission.RID, n)
		}
	}
	var st struct {
		Offered, Served, Failed, Expired, Cancelled int
		Invalid                                     int `json:"invalid_requests"`
		Admission                                   struct{ Refused, Rejected int }
		Reasons                                     struct{ Failed map[string]int } `json:"outcome_reasons"`
	}
	readJSON(t, b.base+"/narwhal/state", &st)
	outcomes := st.Served + st.Failed + st.Expired + st.Cancelled + st.Invalid + st.Admission.Refused + st.Admission.Rejected
	if st.Offered != outcomes || st.Served != 3 || st.Reasons.Failed[string(fault.RouterLost)] != inflight {
		t.Errorf("counters after resume: offered %d, outcomes %d, served %d, router_lost %d; want offered = outcomes, 3 served, %d lost",
			st.Offered, outcomes, st.Served, st.Reasons.Failed[string(fault.RouterLost)], inflight)
	}
}
