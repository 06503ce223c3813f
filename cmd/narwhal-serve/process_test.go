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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
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
	errb *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
	r := &proc{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), errb: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = r.errb
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	w.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-r.done
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
	body := fmt.Sprintf(`{"prompt":"hello","max_tokens":%d,"stream":true}`, tokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
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
	for i := 0; i < 4; i++ {
		go func() {
			b, rid, err := stream(context.Background(), r.base, 60) // ~0.8 s of decode
			results <- result{b, rid, err}
		}()
	}
	time.Sleep(300 * time.Millisecond) // streams are in flight
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
