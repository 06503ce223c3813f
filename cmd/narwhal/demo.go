package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/report"
	"github.com/narwhal-go/narwhal/internal/sim"
)

// demoOptions are narwhal demo's flags.
type demoOptions struct {
	engines  int
	seed     uint64
	rates    []float64
	segmentS float64
	jsonPath string
	trace    string
	workers  int
	workload string
	plotDir  string
	html     string
	burstS   float64
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare static splits, aggregated and adaptive role control in virtual time (what make demo does)",
		Long: `Simulate a fleet under virtual time with the real scheduling core: every
static split kPnD, aggregated engines, narwhal's adaptive controller and the
Arrow paper's policy, on a trace that moves from a balanced mix to
prefill-heavy to decode-heavy, at each offered rate of a sweep. Prints SLO
attainment per arm and rate, the highest rate each arm sustains at 90%
attainment, and one line comparing adaptive with the best static split.
The same seed gives the same table and byte-identical --json output.

--workload shared-prefix instead offers multi-turn sessions on a few long
system prompts to engines with prefix caches, and compares prefill priced
cold with cache-aware pricing on the same trace; then the same sessions
with nothing shared, where cache-aware pricing must not lose.

--workload bursty gathers the moving trace's arrivals into bursts (one every
--burst-s seconds, the same mean rate) and runs adaptive and the even static
split with the scheduling core's deadline queue on (the default) and off:
SLO attainment and goodput per rate, and whether the queue is at least as
good as none at every rate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.workload == "shared-prefix" {
				return runCacheDemo(cmd, o)
			}
			if o.workload == "bursty" {
				return runQueueDemo(cmd, o)
			}
			if o.workload != "moving" {
				return cli.Usage("--workload %q: use moving, shared-prefix or bursty", o.workload)
			}
			return runDemo(cmd, o, cmd.Flags().Changed("rates"))
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.engines, "engines", 8, "engines in the simulated fleet (2 to 99)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the generated trace")
	f.Float64SliceVar(&o.rates, "rates", sim.DemoRates(), "offered rates to sweep in req/s, quoted for 8 engines and scaled to --engines (with --trace: used as given)")
	f.Float64Var(&o.segmentS, "segment-s", sim.DemoSegmentS, "simulated seconds of each of the trace's three phases")
	f.StringVar(&o.jsonPath, "json", "", "also write the narwhal.sim-results document to this file")
	f.StringVar(&o.trace, "trace", "", "replay this trace file (JSON Lines) instead of generating one; --rates rescales its clock")
	f.StringVar(&o.plotDir, "plot", "", "also write the report's charts (attainment per rate per arm, adaptive arms' roles over time) as PNG and SVG into this directory")
	f.StringVar(&o.html, "html", "", "also write the charts and tables as one self-contained HTML page")
	f.IntVar(&o.workers, "workers", runtime.NumCPU(), "simulations run in parallel (results do not depend on it)")
	f.StringVar(&o.workload, "workload", "moving", "moving (the three-phase trace), shared-prefix (multi-turn sessions: cold vs cache-aware prefill pricing) or bursty (the moving trace in bursts: deadline queue on vs off)")
	f.Float64Var(&o.burstS, "burst-s", 5, "with --workload bursty: seconds between bursts")
	return cmd
}

func runDemo(cmd *cobra.Command, o demoOptions, ratesSet bool) error {
	s, err := o.sweep(ratesSet)
	if err != nil {
		return err
	}
	// The simulation allocates many short-lived steps and events over a
	// small live heap; collecting less often roughly halves its wall time.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	start := time.Now()
	res, err := s.Run()
	if err != nil {
		return cli.Failed(err)
	}
	elapsed := time.Since(start)
	// The table first: a long sweep is not lost to a bad --json path.
	if err := res.WriteTable(cmd.OutOrStdout()); err != nil {
		return cli.Failed(err)
	}
	if err := writeResults(o.jsonPath, res); err != nil {
		return err
	}
	if err := writeCharts(cmd, o.plotDir, o.html, report.FromSim(res)); err != nil {
		return err
	}
	// Wall time goes to stderr: stdout stays identical run to run.
	fmt.Fprintf(cmd.ErrOrStderr(), "simulated %d runs in %.1f s\n", len(res.Arms)*len(res.Rates), elapsed.Seconds())
	return nil
}

// sweep turns the flags into a sweep; flag problems are usage errors.
func (o demoOptions) sweep(ratesSet bool) (sim.Sweep, error) {
	if o.engines < 2 || o.engines > 99 {
		return sim.Sweep{}, cli.Usage("--engines %d: simulate between 2 and 99 engines", o.engines)
	}
	if !(o.segmentS > 0) {
		return sim.Sweep{}, cli.Usage("--segment-s must be a positive number of seconds")
	}
	s := sim.Sweep{Fleet: sim.DemoFleet(o.engines), Arms: sim.AllArms(o.engines), Seed: o.seed,
		Segments: sim.MovingSegments(o.segmentS), Target: 0.9, Workers: max(1, o.workers)}
	for _, r := range o.rates {
		if !(r > 0) {
			return sim.Sweep{}, cli.Usage("--rates %v: every rate must be a positive number of requests per second", r)
		}
	}
	if o.trace != "" {
		tr, err := readTrace(o.trace)
		if err != nil {
			return sim.Sweep{}, err
		}
		s.Replay = &tr
		if ratesSet {
			s.Rates = o.rates
		}
		return s, nil
	}
	// Rates are quoted for eight engines so that --engines keeps the load
	// per engine.
	for _, r := range o.rates {
		s.Rates = append(s.Rates, r*float64(o.engines)/8)
	}
	return s, nil
}

func readTrace(path string) (sim.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return sim.Trace{}, cli.Invalid(fmt.Errorf("--trace: %w", err))
	}
	defer f.Close()
	tr, err := sim.ReadTrace(f, path)
	if err != nil {
		return sim.Trace{}, cli.Invalid(err)
	}
	return tr, nil
}

// runCacheDemo is --workload shared-prefix: two sweeps, two tables.
func runCacheDemo(cmd *cobra.Command, o demoOptions) error {
	switch {
	case o.engines < 2 || o.engines > 99:
		return cli.Usage("--engines %d: simulate between 2 and 99 engines", o.engines)
	case o.trace != "" || o.jsonPath != "" || cmd.Flags().Changed("rates"):
		return cli.Usage("--workload shared-prefix takes none of --trace, --json and --rates: it runs its own two sweeps")
	case !(o.segmentS > 0):
		return cli.Usage("--segment-s must be a positive number of seconds")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for i, s := range sim.SharedPrefixSweeps(o.engines, o.seed, 2*o.segmentS, max(1, o.workers)) {
		res, err := s.Run()
		if err != nil {
			return cli.Failed(err)
		}
		if i > 0 {
			fmt.Fprintln(cmd.OutOrStdout())
		}
		if err := res.WriteTable(cmd.OutOrStdout()); err != nil {
			return cli.Failed(err)
		}
	}
	return nil
}

// runQueueDemo is --workload bursty: one sweep, the queue table.
func runQueueDemo(cmd *cobra.Command, o demoOptions) error {
	if o.trace != "" || o.plotDir != "" || o.html != "" {
		return cli.Usage("--workload bursty takes none of --trace, --plot and --html")
	}
	if !(o.burstS > 0) {
		return cli.Usage("--burst-s must be a positive number of seconds")
	}
	s, err := o.sweep(cmd.Flags().Changed("rates"))
	if err != nil {
		return err
	}
	s.Arms, s.BurstS = sim.QueueArms(o.engines), o.burstS
	s.Fleet.BatchedPrefill = true // a burst's prompts share prefill steps, as on simengine and vLLM
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	res, err := s.Run()
	if err != nil {
		return cli.Failed(err)
	}
	if err := res.WriteQueueTable(cmd.OutOrStdout()); err != nil {
		return cli.Failed(err)
	}
	if err := writeResults(o.jsonPath, res); err != nil {
		return err
	}
	return nil
}

// writeResults writes the narwhal.sim-results document to path ("" for
// none), atomically.
func writeResults(path string, res *sim.Results) error {
	if path == "" {
		return nil
	}
	b, err := res.JSON()
	if err != nil {
		return cli.Failed(err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return cli.Failed(fmt.Errorf("%w: check that the directory exists and is writable", err))
	}
	return nil
}
