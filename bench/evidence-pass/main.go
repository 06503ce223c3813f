// Command evidence-pass measures the router's evidence pass on a large
// journal (issue 29: "a 1 GB journal: the evidence pass's RSS ≤ 64 MB and
// its CPU per pass proportional to new rows only").
//
// It writes a rotated journal of -mib MiB (journal.Writer, 64 MiB files,
// rows shaped as the router writes them, -rate arrivals a second, four
// engines) and an evidence store with an accepted DecisionRequest and a
// boot record per engine, then runs the pass in a process of its own
// (this program again), so that the resident memory measured is the
// pass's and not the writer's: a first pass over the whole journal, then
// one pass after each -append count of new rows, then an idle pass. For
// each it prints the bytes and rows read, the rows the window holds, CPU
// and wall time, and the process's peak and current RSS.
//
// It exits 1 unless the peak RSS stays within -rss-bound MiB, every pass
// after the first read exactly the bytes appended since the one before,
// and the idle pass read none. CPU is reported, not judged: the machine
// is shared.
//
//	go run ./bench/evidence-pass [-mib 1024] [-rate 100] [-window 10m] [-append 10000,100000] [-rss-bound 64] [-dir DIR]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

type options struct {
	mib      int64
	rate     float64
	window   time.Duration
	appends  []int
	rssBound float64
	dir      string
	measure  bool
	rows     int // rows the generator wrote (-measure)
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "evidence-pass: %v\n", err)
		os.Exit(2)
	}
	if o.measure {
		os.Exit(measure(o))
	}
	os.Exit(run(o))
}

func parse(args []string) (options, error) {
	var o options
	var appends string
	fs := flag.NewFlagSet("evidence-pass", flag.ContinueOnError)
	fs.Int64Var(&o.mib, "mib", 1024, "journal size to write, MiB")
	fs.Float64Var(&o.rate, "rate", 100, "arrivals per second of the journal's clock (the window holds rate × window rows)")
	fs.DurationVar(&o.window, "window", 10*time.Minute, "the evidence window (narwhal-serve --evidence-window)")
	fs.StringVar(&appends, "append", "10000,100000", "rows appended before each pass after the first, comma-separated")
	fs.Float64Var(&o.rssBound, "rss-bound", 64, "the measuring process's peak RSS bound, MiB")
	fs.StringVar(&o.dir, "dir", "", "directory for the journal and store (default: a temporary one, removed after)")
	fs.BoolVar(&o.measure, "measure", false, "internal: run the passes on -dir (the second process)")
	fs.IntVar(&o.rows, "rows", 0, "internal: the rows the journal in -dir holds")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, f := range strings.Split(appends, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-append %q: want positive row counts, comma-separated", appends)
		}
		o.appends = append(o.appends, n)
	}
	if o.mib < 1 || o.rate <= 0 || o.window <= 0 {
		return o, fmt.Errorf("-mib, -rate and -window must be positive")
	}
	if o.measure && o.dir == "" {
		return o, fmt.Errorf("-measure needs -dir")
	}
	return o, nil
}

// run writes the journal and store, then measures in a child process.
func run(o options) int {
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "evidence-pass-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "evidence-pass: %v\n", err)
			return 1
		}
		defer os.RemoveAll(d)
		dir = d
	}
	start := time.Now()
	rows, err := generate(dir, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evidence-pass: write the journal: %v\n", err)
		return 1
	}
	fmt.Printf("wrote %d MiB, %d rows in %s (%s)\n", o.mib, rows, time.Since(start).Round(time.Millisecond), dir)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "evidence-pass: %v\n", err)
		return 1
	}
	args := []string{"-measure", "-dir", dir, "-rows", strconv.Itoa(rows), "-rate", fmt.Sprint(o.rate), "-window", o.window.String(),
		"-rss-bound", fmt.Sprint(o.rssBound), "-append", joinInts(o.appends)}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "evidence-pass: %v\n", err)
		return 1
	}
	return 0
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
