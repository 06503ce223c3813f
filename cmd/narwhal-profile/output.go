package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
	nprogress "github.com/narwhal-go/narwhal/internal/progress"
)

// progress shows the engines' phases on stderr (internal/progress: a
// bar on a terminal, a line per step elsewhere, nothing with --quiet).
// It never writes to stdout, so JSON mode's stdout holds only the
// envelope.
type progress struct {
	mu    sync.Mutex // guards state and frac
	bar   *nprogress.Bar
	n     int // engines profiled
	state map[string]string
	frac  map[string]float64
}

func newProgress(w io.Writer, engines int, quiet bool) *progress {
	return &progress{bar: nprogress.New(w, "narwhal-profile", quiet), n: max(1, engines), state: map[string]string{}, frac: map[string]float64{}}
}

// phaseWeight is each phase's rough share of an engine's sweep.
var phaseWeight = map[string][2]float64{sweep.PhasePrefill: {0, 0.3}, sweep.PhaseDecode: {0.3, 0.6}, sweep.PhaseWarm: {0.9, 0.1}}

func (p *progress) update(iid, phase string, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := phaseWeight[phase]
	p.frac[iid] = w[0] + w[1]*float64(done)/float64(max(total, 1))
	p.state[iid] = fmt.Sprintf("%s %s %d/%d", iid, phase, done, total)
	p.showLocked()
}

func (p *progress) finish(iid string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frac[iid] = 1
	p.state[iid] = iid + " done"
	if err != nil {
		p.state[iid] = iid + " FAILED"
	}
	p.showLocked()
}

// showLocked shows every engine's step and the mean share done (an
// engine not started counts 0), so the estimate does not swing with the
// slowest engine. Called with mu held.
func (p *progress) showLocked() {
	ids := make([]string, 0, len(p.state))
	total := 0.0
	for id := range p.state {
		ids = append(ids, id)
		total += p.frac[id]
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = p.state[id]
	}
	p.bar.Set(total/float64(p.n), strings.Join(parts, " | "))
}

// end finishes the display.
func (p *progress) end(failed bool) {
	if failed {
		p.bar.Finish("failed")
		return
	}
	p.bar.Finish("profiled")
}

// report is a finished run as the operator reads it.
type report struct {
	job      *job
	results  []sweep.Result
	written  int
	elapsed  time.Duration
	writeErr error
	evidence []engineRecord
	// router is what --router found (nil without it).
	router     *routerCheck
	routerWait time.Duration
}

func (r report) failed() bool {
	if r.writeErr != nil {
		return true
	}
	for _, x := range r.results {
		if x.Err != nil {
			return true
		}
	}
	return false
}

func (r report) text(c *cobra.Command) error {
	out := c.OutOrStdout()
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENGINE\tTTFT a·n²+b·n+c\tTPOT slope·k+req·q+c\tFIT/CV MAPE\tKV TOKENS\tDECODE REQ/S @SLO")
	for _, x := range r.results {
		if x.Row == nil {
			continue
		}
		fmt.Fprintln(tw, r.rowLine(x.Row))
	}
	tw.Flush()
	for _, x := range r.results {
		if x.Err != nil {
			fmt.Fprintf(c.ErrOrStderr(), "narwhal-profile: %v\n", x.Err)
		}
	}
	fmt.Fprintf(out, "samples: %s\n", sweep.SamplesPath(r.job.out))
	if r.writeErr != nil {
		return cli.Failed(r.writeErr)
	}
	if r.failed() {
		fmt.Fprintf(out, "no profiles written: the store %s is unchanged (fix the failing engines and re-run)\n", r.job.out)
		return cli.Silent(cli.ExitFailed)
	}
	for _, e := range r.evidence {
		fmt.Fprintf(out, "evidence: %s workload record %s (execution %s)\n", e.Engine, e.Record, e.Execution)
	}
	fmt.Fprintf(out, "wrote %d profile(s) to %s in %.1fs\n", r.written, r.job.out, r.elapsed.Seconds())
	if r.router != nil {
		fmt.Fprintln(out, r.router.line(r.routerWait))
		if !r.router.Taken {
			return cli.Silent(cli.ExitFailed)
		}
	}
	return nil
}

// rowLine is one engine's line of the final table; decode req/s is priced
// at slo.tpot_s for the largest measured decode input and --decode-tokens.
func (r report) rowLine(row *profile.Row) string {
	kv := "-"
	if row.KVCapacityTokens != nil {
		kv = fmt.Sprint(*row.KVCapacityTokens)
	}
	ctx, out := r.shape()
	rs := 0.0
	if row.TPOTRequestSlope != nil {
		rs = *row.TPOTRequestSlope
	}
	return fmt.Sprintf("%s\t%.3g %.3g %.3g\t%.3g %.3g %.3g\t%.4f/%.4f\t%s\t%.2f (ctx %d, out %d)", row.IID,
		row.TTFTA, row.TTFTB, row.TTFTC, row.TPOTSlope, rs, row.TPOTIntercept, *row.DecodeFitMAPE, *row.DecodeCVMAPE, kv,
		row.DecodeRPS(r.job.cfg.SLO.TPOT, ctx, out, 1), ctx, out)
}

func (r report) shape() (ctx, out int) {
	for _, x := range r.results {
		if x.Samples != nil {
			for _, c := range x.Samples.DecodeCells {
				ctx = max(ctx, c.InputTokens)
			}
			out = x.Samples.Config.DecodeTokens
		}
	}
	return ctx + out, out
}

// jsonEngine is one engine in data.results.
type jsonEngine struct {
	IID     string       `json:"iid"`
	OK      bool         `json:"ok"`
	Error   string       `json:"error,omitempty"`
	Profile *profile.Row `json:"profile,omitempty"`
}

func (r report) json(c *cobra.Command, res cmdresult.Result) error {
	var ids []string
	var rows []jsonEngine
	for i, x := range r.results {
		iid := r.job.engines[i].IID
		ids = append(ids, iid)
		je := jsonEngine{IID: iid, OK: x.Err == nil, Profile: x.Row}
		if x.Err != nil {
			je.Error = x.Err.Error()
			res.Errors = append(res.Errors, cmdresult.Problem{Code: "profile_failed", Message: je.Error, Command: res.Command, Stage: "sweep", Engine: iid})
		}
		rows = append(rows, je)
	}
	res.Status = cmdresult.Success
	if r.failed() {
		res.Status = cmdresult.FailedGate
	}
	if r.writeErr != nil {
		res.Errors = append(res.Errors, cmdresult.Problem{Code: "write_failed", Message: r.writeErr.Error(), Command: res.Command, Stage: "write"})
	}
	data := map[string]any{"engines": ids, "results": rows, "written": r.written, "elapsed_s": r.elapsed.Seconds(), "evidence": r.evidence}
	res.Data = data
	if r.router != nil {
		data["router"] = r.router
		if !r.router.Taken {
			res.Status = cmdresult.FailedGate
			res.Errors = append(res.Errors, cmdresult.Problem{Code: "router_not_taken", Message: r.router.line(r.routerWait), Command: res.Command, Stage: "router"})
		}
	}
	res.Artifacts = []cmdresult.Artifact{{Kind: "profile_samples", Path: sweep.SamplesPath(r.job.out), State: "updated"}}
	if r.written > 0 {
		res.Artifacts = append(res.Artifacts, cmdresult.Artifact{Kind: "profile_store", Path: r.job.out, State: "updated"})
	}
	if err := res.Write(c.OutOrStdout(), cmdresult.NewRedactor(os.Environ(), r.job.cfg.Engine.EngineAPIKeyEnv)); err != nil {
		return cli.Failed(err)
	}
	if res.Status != cmdresult.Success {
		return cli.Silent(cli.ExitFailed)
	}
	return nil
}
