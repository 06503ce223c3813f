package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/loadgen"
	"github.com/narwhal-go/narwhal/internal/report"
)

// benchOptions are narwhal bench's flags.
type benchOptions struct {
	router, model, trace, out string
	prompt, output            string
	rate, duration            float64
	sweep                     []float64
	limit, maxRetries         int
	seed                      uint64
	requestTimeout, drain     time.Duration
	quiet                     bool
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --router URL (--trace T | --rate R --duration D | --sweep r1,r2,… --duration D)",
		Short: "Offer open-loop load to a router and time every request on the client side",
		Long: `Offer a fixed schedule of streaming completions to a router: Poisson arrivals
at --rate for --duration seconds, one such step per rate of --sweep, or the
requests of a simulator trace (--trace, the format narwhal demo --trace
reads; --sweep rescales its clock). Arrivals never wait for earlier answers
(open loop); an arrival that finds --concurrency-limit requests in flight is
recorded as client_limit, not sent. Each request asks for exactly its output
length and is timed by the client: TTFT (send → first token), TPOT and
end-to-end. Results go to --out as JSON Lines (a header, then one record per
offered request, keyed by the X-Request-Id sent, which the router's journal
keeps as client_rid); a progress bar goes to stderr and the report of the
results to stdout. The run ends by the offer window plus --drain-timeout at
the latest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.router, "router", "", "the router's base URL, e.g. http://127.0.0.1:8000 (required)")
	f.StringVar(&o.model, "model", "", "model to request (default: the router's only model)")
	f.StringVar(&o.trace, "trace", "", "replay this simulator trace (JSON Lines) instead of Poisson arrivals")
	f.Float64Var(&o.rate, "rate", 0, "offered requests per second (Poisson)")
	f.Float64SliceVar(&o.sweep, "sweep", nil, "offered rates, one step of --duration each, back to back (with --trace: the trace's clock is rescaled to each)")
	f.Float64Var(&o.duration, "duration", 0, "seconds of arrivals per rate")
	f.IntVar(&o.limit, "concurrency-limit", 1024, "most requests in flight; an arrival beyond it is recorded, not sent")
	f.StringVar(&o.prompt, "prompt-tokens", "512", "prompt length: N or lognormal:MEAN:SIGMA[:MAX]")
	f.StringVar(&o.output, "output-tokens", "128", "output length: N or lognormal:MEAN:SIGMA[:MAX] (same SIGMA as the prompt)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the arrivals and lengths")
	f.StringVar(&o.out, "out", "bench.jsonl", "results file (JSON Lines); - for stdout")
	f.DurationVar(&o.requestTimeout, "request-timeout", 120*time.Second, "bound of one request")
	f.DurationVar(&o.drain, "drain-timeout", 60*time.Second, "how long in-flight requests may take after the last arrival")
	f.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	f.IntVar(&o.maxRetries, "max-retries", loadgen.DefaultMaxRetries, "retry each call as OpenAI's SDKs do (x-should-retry, Retry-After, 408/409/429/5xx), at most this often; 0 sends each once. The report shows HTTP attempts per call")
	return cmd
}

func runBench(cmd *cobra.Command, o benchOptions) error {
	if o.maxRetries < 0 {
		return cli.Usage("--max-retries %d: give 0 (no retries) or more", o.maxRetries)
	}
	sched, err := o.schedule()
	if err != nil {
		return err
	}
	out, closeOut, err := benchOutput(o.out, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	cfg := loadgen.Config{Router: o.router, Model: o.model, Schedule: sched, Seed: o.seed, Limit: o.limit,
		RequestTimeout: o.requestTimeout, DrainTimeout: o.drain, Out: out, MaxRetries: o.maxRetries}
	if !o.quiet {
		cfg.Progress = cmd.ErrOrStderr()
	}
	g, err := loadgen.New(cfg)
	if err != nil {
		return cli.Usage("%v", err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, runErr := g.Run(ctx)
	if err := closeOut(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return cli.Failed(runErr)
	}
	if o.out == "-" {
		return nil
	}
	return benchSummary(cmd.OutOrStdout(), o.out)
}

// benchSummary prints narwhal report's text for the results just written.
func benchSummary(w io.Writer, path string) error {
	r, err := report.ReadBench(path, report.Options{})
	if err != nil {
		fmt.Fprintf(w, "results in %s (%v)\n", path, err)
		return nil
	}
	fmt.Fprintf(w, "results in %s; join with the router's journal: narwhal report %s JOURNAL\n\n", path, path)
	if err := report.WriteText(w, []*report.Run{r}); err != nil {
		return cli.Failed(err)
	}
	return nil
}

func (o benchOptions) schedule() (loadgen.Schedule, error) {
	if o.router == "" {
		return loadgen.Schedule{}, cli.Usage("--router is required: the router's base URL")
	}
	rates := o.sweep
	if o.rate > 0 {
		if len(rates) > 0 {
			return loadgen.Schedule{}, cli.Usage("--rate and --sweep: give one of them")
		}
		rates = []float64{o.rate}
	}
	for _, r := range rates {
		if !(r > 0) {
			return loadgen.Schedule{}, cli.Usage("rate %v: every rate must be a positive number of requests per second", r)
		}
	}
	if o.trace != "" {
		tr, err := readTrace(o.trace)
		if err != nil {
			return loadgen.Schedule{}, err
		}
		return loadgen.Replay(tr, rates)
	}
	if len(rates) == 0 || !(o.duration > 0) {
		return loadgen.Schedule{}, cli.Usage("give --trace T, or --rate R (or --sweep r1,r2,…) with --duration D seconds")
	}
	in, err := loadgen.ParseDist(o.prompt)
	if err != nil {
		return loadgen.Schedule{}, cli.Usage("--prompt-tokens: %v", err)
	}
	out, err := loadgen.ParseDist(o.output)
	if err != nil {
		return loadgen.Schedule{}, cli.Usage("--output-tokens: %v", err)
	}
	s, err := loadgen.Poisson(rates, o.duration, in, out, o.seed)
	if err != nil {
		return loadgen.Schedule{}, cli.Usage("%v", err)
	}
	return s, nil
}

// benchOutput opens the results file; closeOut flushes and closes it.
func benchOutput(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "-" {
		bw := bufio.NewWriter(stdout)
		return bw, bw.Flush, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, cli.Invalid(fmt.Errorf("--out: %w; check that the directory exists and is writable", err))
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	return bw, func() error {
		if err := bw.Flush(); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}, nil
}
