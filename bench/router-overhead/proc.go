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
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat;
// it is 100 on every Linux ABI Go supports.
const clockTicks = 100

// routerProc is one narwhal-serve process under measurement. Its CPU and
// peak RSS come from the kernel's accounting of that process alone, so
// the engines and clients in this process do not blur them.
type routerProc struct {
	name string
	base string
	cmd  *exec.Cmd
	done chan struct{}
}

// startServe writes a fleet over urls into dir and starts bin on it with a
// free loopback port, waiting for its "listening" log line.
func startServe(name, bin, dir string, urls []string, prefill, decode float64) (*routerProc, error) {
	fleetPath, err := writeFleet(filepath.Join(dir, name), urls, prefill, decode)
	if err != nil {
		return nil, err
	}
	return startProc(name, bin, "--fleet", fleetPath, "--port", "0", "--log-format", "json",
		"--journal", filepath.Join(dir, name, "journal.jsonl"))
}

// startProc starts bin with args and waits for its JSON "… listening"
// log line on stderr, which carries the address it serves.
func startProc(name, bin string, args ...string) (*routerProc, error) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &routerProc{name: name, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go p.readLog(stderr, addr)
	select {
	case a := <-addr:
		p.base = "http://" + a
		fmt.Fprintf(os.Stderr, "router-overhead: %s is pid %d at %s\n", name, cmd.Process.Pid, p.base)
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s (%s) exited before listening; its log is above", name, bin)
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s (%s) did not log that it listens within 30 s", name, bin)
	}
}

// readLog passes the router's log through to stderr, except the routine
// info lines, and hands over the listening address once.
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
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Level == "INFO" {
			if strings.HasSuffix(line.Msg, " listening") && line.Addr != "" {
				addr <- line.Addr
			}
			continue
		}
		fmt.Fprintf(os.Stderr, "[%s] %s\n", p.name, sc.Text())
	}
}

// cpuSeconds is the process's user plus system time so far.
func (p *routerProc) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// resetPeak starts a new peak-RSS window (Linux clear_refs value 5).
func (p *routerProc) resetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}

// peakRSSMB is the peak resident set since the last resetPeak (VmHWM).
func (p *routerProc) peakRSSMB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// runtimeStats is what scrape reads from the router's /metrics.
type runtimeStats struct{ goroutines, heapMB, stackMB, mallocs float64 }

// scrape reads the Go runtime's gauges from the router's /metrics.
func (p *routerProc) scrape() runtimeStats {
	var st runtimeStats
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return st
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			st.goroutines = v
		case "go_memstats_heap_inuse_bytes":
			st.heapMB = v / (1 << 20)
		case "go_memstats_stack_inuse_bytes":
			st.stackMB = v / (1 << 20)
		case "go_memstats_mallocs_total":
			st.mallocs = v
		}
	}
	return st
}

// stop sends SIGTERM (the router drains, then exits) and waits, killing
// it after 10 s.
func (p *routerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// writeFleet writes the bench fleet and its profile store into dir and
// returns the fleet file's path. The document names only what the bench
// sets, so older builds (a -baseline-bin) read it as well as this one.
func writeFleet(dir string, urls []string, prefill, decode float64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg, store, err := benchFleet(urls, prefill, decode)
	if err != nil {
		return "", err
	}
	doc := benchDoc{Schema: fleet.Schema, SchemaVersion: fleet.SchemaVersion, Model: cfg.Model, Engines: cfg.Engines}
	doc.SLO.TTFT, doc.SLO.TPOT = cfg.SLO.TTFT, cfg.SLO.TPOT
	doc.Serving.MaxConnections = cfg.Serving.MaxConnections
	doc.Engine.Tokenize = cfg.Engine.Tokenize
	doc.Profiles.Path = filepath.Join(dir, "profiles.json")
	doc.Recovery.StatePath = filepath.Join(dir, "state.json")
	if err := profile.Save(doc.Profiles.Path, store); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", err
	}
	if _, err := fleet.Load(path); err != nil {
		return "", fmt.Errorf("the bench's own fleet document: %w", err)
	}
	return path, nil
}

// benchDoc is the part of a narwhal.fleet v1 document the bench sets.
type benchDoc struct {
	Schema        string         `json:"schema"`
	SchemaVersion int            `json:"schema_version"`
	Model         string         `json:"model"`
	Engines       []fleet.Engine `json:"engines"`
	SLO           struct {
		TTFT float64 `json:"ttft_s"`
		TPOT float64 `json:"tpot_s"`
	} `json:"slo"`
	Serving struct {
		MaxConnections int `json:"max_connections"`
	} `json:"serving"`
	Engine struct {
		Tokenize bool `json:"tokenize"`
	} `json:"engine"`
	Recovery struct {
		StatePath string `json:"state_path"`
	} `json:"recovery"`
	Profiles struct {
		Path string `json:"path"`
	} `json:"profiles"`
}

// benchFleet is the fleet the router serves: the first half of urls
// prefill, the rest decode, every engine with the bench profile.
func benchFleet(urls []string, prefill, decode float64) (*fleet.Config, *profile.Store, error) {
	cfg := fleet.Defaults()
	cfg.Model = "bench"
	cfg.SLO = fleet.SLO{TTFT: 5, TPOT: 1}
	cfg.Serving.MaxConnections = 4096
	cfg.Engine.Tokenize = false // sizing by estimate: the bench measures the serving path
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i, u := range urls {
		iid, role := fmt.Sprintf("p%d", i), fleet.Prefill
		if i >= len(urls)/2 {
			iid, role = fmt.Sprintf("d%d", i-len(urls)/2), fleet.Decode
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
		store.Profiles = append(store.Profiles, benchProfile(iid, prefill, decode))
	}
	if err := cfg.Validate("bench"); err != nil {
		return nil, nil, err
	}
	return &cfg, store, nil
}
