package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// Engine limits for the bench: room for every stream at once, so the
// engines never queue and the paths differ only in what sits between the
// client and them.
const (
	benchMaxNumSeqs  = 4096
	benchKVTokens    = 1 << 22
	benchMaxModelLen = 8192
)

// startEngines serves o.nEng simulated engines and returns their URLs.
// By default each is a narwhal-engine sim process of its own, as an
// operator runs them, so the engines' CPU is neither this process's nor
// the router's; -engines-inprocess serves them inside this process (as
// -inprocess profiling wants).
func startEngines(o options, dir string) ([]string, func(), error) {
	if o.engInProcess {
		fl, err := simengine.StartFleet(o.nEng, simengine.Config{Model: "bench", Profile: benchProfile("x", o.prefill, o.decode),
			MaxNumSeqs: benchMaxNumSeqs, KVCapacityTokens: benchKVTokens, MaxModelLen: benchMaxModelLen}, nil)
		if err != nil {
			return nil, nil, err
		}
		return fl.URLs(), func() { fl.Close() }, nil
	}
	bin, store, err := engineSetup(o, dir)
	if err != nil {
		return nil, nil, err
	}
	var procs []*exec.Cmd
	stop := func() {
		for _, c := range procs {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}
	var urls []string
	for i := range o.nEng {
		cmd, url, err := startEngine(bin, store, i)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs, urls = append(procs, cmd), append(urls, url)
	}
	fmt.Fprintf(os.Stderr, "router-overhead: %d engines in their own processes: %s\n", len(urls), strings.Join(urls, " "))
	return urls, stop, nil
}

// engineSetup builds narwhal-engine into dir and writes the engines'
// profile store there (row e<i> for engine i).
func engineSetup(o options, dir string) (bin, store string, err error) {
	bin = filepath.Join(dir, "narwhal-engine")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/narwhal-engine").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/narwhal-engine (run from the repository root): %v\n%s", err, out)
	}
	st := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	for i := range o.nEng {
		st.Profiles = append(st.Profiles, benchProfile(fmt.Sprintf("e%d", i), o.prefill, o.decode))
	}
	store = filepath.Join(dir, "engine-profiles.json")
	return bin, store, profile.Save(store, st)
}

// startEngine starts engine i on a free loopback port and returns it with
// the URL from its banner (the first stdout line that starts with it).
func startEngine(bin, store string, i int) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "sim", "--port", "0", "--model", "bench", "--profile", store, "--profile-iid", fmt.Sprintf("e%d", i),
		"--max-num-seqs", fmt.Sprint(benchMaxNumSeqs), "--kv-capacity-tokens", fmt.Sprint(benchKVTokens),
		"--max-model-len", fmt.Sprint(benchMaxModelLen))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = io.Discard // per-request info lines; a failure to start shows as no banner
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start engine %d (%s): %w", i, bin, err)
	}
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 0 && strings.HasPrefix(f[0], "http://") {
				url <- f[0]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case u := <-url:
		return cmd, u, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("engine %d (%s sim) printed no URL within 30 s", i, bin)
	}
}
