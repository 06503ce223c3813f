package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
)

// job is everything one run needs once the input checked out.
type job struct {
	cfg     *fleet.Config
	engines []fleet.Engine
	limits  map[string]int
	out     string
	key     string
	prev    *profile.Store // --merge: the store being merged into
}

func run(c *cobra.Command, f *flags) error {
	asJSON := f.format == "json"
	res := cmdresult.Result{Command: "narwhal-profile", Operation: "profile"}
	if err := f.check(); err != nil {
		return err
	}
	j, err := prepare(f)
	if err != nil {
		return invalid(c, res, asJSON, err)
	}
	ctx, stop := signalContext(c)
	defer stop()
	start := time.Now()
	p := newProgress(c.ErrOrStderr(), len(j.engines), f.quiet)
	run := sweep.Fleet{Config: j.cfg, Engines: j.engines, Limits: j.limits, Out: j.out, APIKey: j.key, Prev: j.prev,
		Progress: p.update, Finished: p.finish}
	results := run.Sweep(ctx, f.parsed)
	written, werr := run.Write(results)
	p.end(werr != nil || report{results: results}.failed())
	var ev []engineRecord
	if werr == nil && written > 0 {
		ev, werr = writeEvidence(j.cfg, results, sweep.SamplesPath(j.out), f.evidenceDir)
	}
	rep := report{job: j, results: results, written: written, elapsed: time.Since(start), writeErr: werr, evidence: ev, routerWait: f.routerWait}
	if f.router != "" && werr == nil && written > 0 && !rep.failed() {
		rc := awaitRouter(ctx, f.router, j.out, f.routerWait)
		rep.router = &rc
	}
	if asJSON {
		return rep.json(c, res)
	}
	return rep.text(c)
}

func prepare(f *flags) (*job, error) {
	cfg, err := fleet.Load(f.fleet)
	if err != nil {
		return nil, err
	}
	j := &job{cfg: cfg, out: f.out}
	if j.engines, err = selectEngines(cfg, f.engines); err != nil {
		return nil, err
	}
	if j.limits, err = loadLimits(f.limits); err != nil {
		return nil, err
	}
	if j.out == "" {
		j.out = cfg.Profiles.Path
	}
	if fi, err := os.Lstat(j.out); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("--out %s is a symlink; name the real file", j.out)
	}
	if f.merge {
		if j.prev, err = profile.Load(j.out); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--merge: %w", err)
		}
	}
	if j.key, err = cfg.Engine.APIKey(os.LookupEnv); err != nil {
		return nil, err
	}
	return j, nil
}

// loadLimits reads a profiling limits file:
// {"engines": {"<iid>": {"max_num_seqs": N}}}.
func loadLimits(path string) (map[string]int, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--limits: %w", err)
	}
	var doc struct {
		Engines map[string]struct {
			MaxNumSeqs int `json:"max_num_seqs"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Engines == nil {
		return nil, fmt.Errorf("--limits %s: want {\"engines\": {\"<iid>\": {\"max_num_seqs\": N}}}", path)
	}
	out := map[string]int{}
	for iid, l := range doc.Engines {
		if l.MaxNumSeqs <= 0 {
			return nil, fmt.Errorf("--limits %s: engines.%s.max_num_seqs must be a positive integer", path, iid)
		}
		out[iid] = l.MaxNumSeqs
	}
	return out, nil
}

func invalid(c *cobra.Command, res cmdresult.Result, asJSON bool, err error) error {
	if !asJSON {
		return cli.Invalid(err)
	}
	res.Status = cmdresult.InvalidInput
	res.Errors = []cmdresult.Problem{{Code: "invalid_input", Message: err.Error(), Command: res.Command, Stage: "input"}}
	if werr := res.Write(c.OutOrStdout(), cmdresult.NewRedactor(os.Environ())); werr != nil {
		return cli.Failed(werr)
	}
	fmt.Fprintf(c.ErrOrStderr(), "narwhal-profile: %v\n", err)
	return cli.Silent(cli.ExitInvalid)
}
