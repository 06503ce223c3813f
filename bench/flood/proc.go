package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// routerProc is the narwhal-serve process under measurement: its
// descriptors, threads and RSS are read from /proc/PID, so the engines
// and the flood's own connections in this process are not counted.
type routerProc struct {
	base string
	cmd  *exec.Cmd
	done chan struct{}
}

// buildServe builds narwhal-serve from this tree into dir.
func buildServe(dir string) (string, error) {
	bin := filepath.Join(dir, "narwhal-serve")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/narwhal-serve").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/narwhal-serve (run from the repository root, or pass -router-bin): %v\n%s", err, out)
	}
	return bin, nil
}

// startServe writes a fleet over urls into dir and starts bin on a free
// loopback port with args (and GOMEMLIMIT=memLimit if set), waiting for
// its "listening" log line.
func startServe(bin, dir string, urls []string, memLimit string, args ...string) (*routerProc, error) {
	fleetPath, err := writeFleet(dir, urls)
	if err != nil {
		return nil, err
	}
	all := append([]string{"--fleet", fleetPath, "--port", "0", "--log-format", "json",
		"--journal", filepath.Join(dir, "journal.jsonl")}, args...)
	cmd := exec.Command(bin, all...)
	if memLimit != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memLimit)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &routerProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go p.readLog(stderr, addr)
	select {
	case a := <-addr:
		p.base = "http://" + a
		fmt.Fprintf(os.Stderr, "flood: narwhal-serve is pid %d at %s\n", cmd.Process.Pid, p.base)
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("narwhal-serve (%s) exited before listening; its log is above", bin)
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("narwhal-serve (%s) did not log \"narwhal-serve listening\" within 30 s", bin)
	}
}

// readLog passes the router's ERROR lines through to stderr (a flood makes
// thousands of WARN lines, one per refused body) and hands over the
// listening address once.
func (p *routerProc) readLog(r io.Reader, addr chan<- string) {
	defer close(p.done)
	defer func() { _ = p.cmd.Wait() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Addr  string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Level == "ERROR" {
			fmt.Fprintf(os.Stderr, "[narwhal-serve] %s\n", sc.Text())
		} else if line.Msg == "narwhal-serve listening" {
			addr <- line.Addr
		}
	}
}

// stop sends SIGTERM and waits, killing the process after 10 s.
func (p *routerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// sample is the router process at one moment: the kernel's view (fds,
// threads, RSS) and the Go runtime's, from its /metrics.
type sample struct {
	Label      string  `json:"label"`
	AtS        float64 `json:"at_s"` // seconds since the phase's flood ended (negative: before; NaN: the peak over the flood)
	FDs        int     `json:"fds"`
	Threads    int     `json:"threads"`
	RSSMiB     float64 `json:"rss_mib"`
	Goroutines float64 `json:"goroutines"`
	// HeapInuseMiB is live spans; HeapReleasedMiB what the scavenger has
	// given back; HeapIdleMiB − HeapReleasedMiB is what Go holds free but
	// still resident.
	HeapInuseMiB    float64 `json:"heap_inuse_mib"`
	HeapIdleMiB     float64 `json:"heap_idle_mib"`
	HeapReleasedMiB float64 `json:"heap_released_mib"`
	StackMiB        float64 `json:"stack_inuse_mib"`
	// NextGCMiB is the heap size at which the next GC starts; GCs the
	// collections so far. A heap that grew in the flood leaves a high
	// goal, and garbage stays resident until a GC frees it (at the goal,
	// or the runtime's forced GC every 2 minutes) and the scavenger then
	// returns the free pages.
	NextGCMiB float64 `json:"next_gc_mib"`
	GCs       float64 `json:"gcs"`
}

// sample reads /proc/PID and /metrics now.
func (p *routerProc) sample(label string) sample {
	s := sample{Label: label}
	pid := p.cmd.Process.Pid
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.FDs = len(fds)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "VmRSS:":
				s.RSSMiB = float64(v) / 1024
			case "Threads:":
				s.Threads = v
			}
		}
	}
	p.scrape(&s)
	return s
}

// scrape reads the Go runtime's gauges from the router's /metrics, on a
// fresh connection closed after it so the scrape holds nothing afterwards.
func (p *routerProc) scrape(s *sample) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(p.base + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	const mib = 1 << 20
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.Goroutines = v
		case "go_memstats_heap_inuse_bytes":
			s.HeapInuseMiB = v / mib
		case "go_memstats_heap_idle_bytes":
			s.HeapIdleMiB = v / mib
		case "go_memstats_heap_released_bytes":
			s.HeapReleasedMiB = v / mib
		case "go_memstats_stack_inuse_bytes":
			s.StackMiB = v / mib
		case "go_memstats_next_gc_bytes":
			s.NextGCMiB = v / mib
		case "go_gc_duration_seconds_count":
			s.GCs = v
		}
	}
}

// peak keeps the largest of each figure over a phase's samples (each
// figure's own maximum, not one moment's).
func peak(a, b sample) sample {
	a.FDs, a.Threads, a.RSSMiB = max(a.FDs, b.FDs), max(a.Threads, b.Threads), max(a.RSSMiB, b.RSSMiB)
	a.Goroutines, a.HeapInuseMiB, a.StackMiB = max(a.Goroutines, b.Goroutines), max(a.HeapInuseMiB, b.HeapInuseMiB), max(a.StackMiB, b.StackMiB)
	a.HeapIdleMiB, a.HeapReleasedMiB = max(a.HeapIdleMiB, b.HeapIdleMiB), max(a.HeapReleasedMiB, b.HeapReleasedMiB)
	return a
}

// startEngines starts n simulated engines in this process (they are not
// what is measured) with room for every request the flood lets through.
func startEngines(n int) (*simengine.Fleet, error) {
	return simengine.StartFleet(n, simengine.Config{Model: "flood", Profile: simengine.DefaultProfile("x")}, nil)
}

// writeFleet writes a fleet over urls (the first half prefill) and its
// profile store into dir and returns the fleet file's path.
func writeFleet(dir string, urls []string) (string, error) {
	cfg := fleet.Defaults()
	cfg.Model = "flood"
	cfg.SLO = fleet.SLO{TTFT: 5, TPOT: 1}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i, u := range urls {
		iid, role := fmt.Sprintf("p%d", i), fleet.Prefill
		if i >= len(urls)/2 {
			iid, role = fmt.Sprintf("d%d", i-len(urls)/2), fleet.Decode
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
		store.Profiles = append(store.Profiles, simengine.DefaultProfile(iid))
	}
	cfg.Profiles.Path = filepath.Join(dir, "profiles.json")
	cfg.Recovery.StatePath = filepath.Join(dir, "state.json")
	if err := cfg.Validate("flood"); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "fleet.json")
	if err := cfg.Save(path); err != nil {
		return "", err
	}
	return path, profile.Save(cfg.Profiles.Path, store)
}
