package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// passResult is one measured pass.
type passResult struct {
	name              string
	bytes             int64
	rows, windowRows  int
	appended          int64 // bytes appended before it (-1: the first pass)
	cpu, wall         time.Duration
	peakMiB, rssMiB   float64
	heapMiB           float64
	servingErr, other string
}

// measure runs the passes on o.dir in this process and judges them.
func measure(o options) int {
	path := filepath.Join(o.dir, "journal.jsonl")
	loop := &tierd.Loop{Store: store.Open(filepath.Join(o.dir, "store")), Fleet: fleetConfig(), JournalPath: path,
		Window: o.window, Clock: ports.SystemClock(), Log: slog.New(slog.DiscardHandler)}
	var out []passResult
	out = append(out, pass(loop, "first: the whole journal", -1))
	written := o.rows
	for _, n := range o.appends {
		before, err := journal.SetBytes(path)
		if err == nil {
			err = appendRows(path, written, n, o.rate)
		}
		after, err2 := journal.SetBytes(path)
		if err != nil || err2 != nil {
			fmt.Fprintf(os.Stderr, "evidence-pass: append: %v %v\n", err, err2)
			return 1
		}
		written += n
		out = append(out, pass(loop, fmt.Sprintf("after %d new rows", n), after-before))
	}
	out = append(out, pass(loop, "idle", 0))
	return report(os.Stdout, out, o)
}

// pass runs one evidence pass and measures it.
func pass(loop *tierd.Loop, name string, appended int64) passResult {
	cpu0, t0 := cpuTime(), time.Now()
	_, err := loop.Pass()
	r := passResult{name: name, appended: appended, cpu: cpuTime() - cpu0, wall: time.Since(t0)}
	st := loop.JournalState()
	r.bytes, r.rows, r.windowRows, r.servingErr = st.Pass.Bytes, st.Pass.Rows, st.WindowRows, st.Error
	if err != nil {
		r.other = err.Error()
	}
	r.peakMiB, r.rssMiB = procMiB("VmHWM:"), procMiB("VmRSS:")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.heapMiB = float64(ms.HeapInuse) / (1 << 20)
	return r
}

// appendRows appends n rows after the first `from` (the router's writer
// opening the journal again, as after a restart).
func appendRows(path string, from, n int, rate float64) error {
	w, err := journal.Open(path, journal.Options{Source: "sha256:" + fmt.Sprintf("%064d", 0), MaxBytes: 64 << 20,
		Clock: ports.NewFake(epoch), Rng: ports.NewSeededRng(2)})
	if err != nil {
		return err
	}
	for i := from; i < from+n; i++ {
		if err := w.Request(row(i, rate)); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

func report(w io.Writer, rs []passResult, o options) int {
	fmt.Fprintf(w, "evidence pass, window %s, %g arrivals/s; RSS bound %g MiB\n\n", o.window, o.rate, o.rssBound)
	fmt.Fprintf(w, "%-26s %12s %9s %9s %10s %10s %12s %9s %8s %8s\n", "pass", "bytes read", "rows", "window", "cpu ms", "wall ms",
		"cpu µs/row", "peak MiB", "RSS MiB", "heap MiB")
	failed := []string{}
	for _, r := range rs {
		perRow := "-"
		if r.rows > 0 {
			perRow = fmt.Sprintf("%.2f", float64(r.cpu.Microseconds())/float64(r.rows))
		}
		fmt.Fprintf(w, "%-26s %12d %9d %9d %10d %10d %12s %9.1f %8.1f %8.1f\n", r.name, r.bytes, r.rows, r.windowRows,
			r.cpu.Milliseconds(), r.wall.Milliseconds(), perRow, r.peakMiB, r.rssMiB, r.heapMiB)
		if r.other != "" || r.servingErr != "" {
			failed = append(failed, fmt.Sprintf("%s: pass error %q, serving error %q", r.name, r.other, r.servingErr))
		}
		if r.appended >= 0 && r.bytes != r.appended {
			failed = append(failed, fmt.Sprintf("%s: read %d bytes, %d were appended", r.name, r.bytes, r.appended))
		}
		if r.peakMiB > o.rssBound {
			failed = append(failed, fmt.Sprintf("%s: peak RSS %.1f MiB over the %g MiB bound", r.name, r.peakMiB, o.rssBound))
		}
	}
	fmt.Fprintln(w)
	if len(failed) > 0 {
		for _, f := range failed {
			fmt.Fprintln(w, "FAIL", f)
		}
		return 1
	}
	fmt.Fprintln(w, "ok: every pass after the first read only the appended bytes; peak RSS within the bound")
	return 0
}

// cpuTime is this process's user + system CPU.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procMiB reads one kB field of /proc/self/status, in MiB.
func procMiB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}
