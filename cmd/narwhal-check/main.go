// Command narwhal-check is preflight: the gates that must pass before a
// router admits traffic to a fleet (docs/preflight.md). Exit 0 when every
// gate passed, 1 when one failed, 2 for bad input.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/check"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/progress"
	"github.com/narwhal-go/narwhal/internal/version"
)

func main() { cli.Main(newRoot()) }

type flags struct {
	fleet, format, evidenceDir string
	plan                       string
	startupLogs                []string // iid=path
	ring, noKV, quiet          bool
	repeats, paceWords         int
}

func newRoot() *cobra.Command {
	f := &flags{}
	root := cli.NewRoot("narwhal-check", "Preflight: reach, contract, hardware, profile, model, pace, tokenize, produce, consume, slo")
	root.Args = cobra.NoArgs
	root.RunE = func(c *cobra.Command, _ []string) error { return run(c, f) }
	fs := root.Flags()
	fs.StringVar(&f.fleet, "fleet", "", "fleet file (narwhal.fleet v1)")
	cli.FormatFlag(fs, &f.format)
	fs.BoolVar(&f.ring, "ring", false, "consume probes by rotating ring instead of the full mesh")
	fs.BoolVar(&f.noKV, "no-kv", false, "skip the produce and consume KV probes")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (off a terminal it is one line per gate)")
	fs.IntVar(&f.repeats, "repeats", 1, "probes per pair (clamped to >= 1)")
	fs.IntVar(&f.paceWords, "pace-words", 4096, "pace prompt length in words ('benchmark ' x N), halved on HTTP 400")
	fs.StringVar(&f.evidenceDir, "evidence-store", "evidence", "evidence store for the run's records; empty writes none")
	fs.StringVar(&f.plan, "plan", "", "prediction record digest (from narwhal plan, in --evidence-store) naming the artifact and hardware class these engines run")
	fs.StringArrayVar(&f.startupLogs, "startup-log", nil, "IID=PATH: that engine's vLLM startup log; each worker's memory observation is stored on its execution (repeatable)")
	return root
}

func run(c *cobra.Command, f *flags) error {
	if f.fleet == "" {
		return cli.Usage("--fleet is required: name the fleet file to check")
	}
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	asJSON := f.format == "json"
	res := cmdresult.Result{Command: "narwhal-check", Operation: "preflight"}
	cfg, err := fleet.Load(f.fleet)
	if err != nil {
		return invalid(c, res, asJSON, "fleet_invalid", err)
	}
	red := cmdresult.NewRedactor(os.Environ(), cfg.Engine.EngineAPIKeyEnv)
	key, err := cfg.Engine.APIKey(os.LookupEnv)
	if err != nil {
		return invalid(c, res, asJSON, "credential_missing", err)
	}
	o := check.Options{Fleet: cfg, APIKey: key, Ring: f.ring, Repeats: f.repeats, NoKV: f.noKV, PaceWords: f.paceWords}
	o.Profiles, o.ProfilesErr = loadProfiles(cfg.Profiles.Path)
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	bar := progress.New(c.ErrOrStderr(), "narwhal-check", f.quiet)
	o.Progress = func(gate string, i, n int) {
		bar.Set(float64(i)/float64(n), fmt.Sprintf("gate %d/%d: %s", i+1, n, gate))
	}
	rep := check.Run(ctx, o)
	bar.Finish(fmt.Sprintf("%d gates, %d failed", len(rep.Gates), len(rep.Failed)))
	bind, err := planBinding(f.evidenceDir, f.plan)
	if err != nil {
		return invalid(c, res, asJSON, "plan_invalid", err)
	}
	logs, err := startupLogs(cfg, f.startupLogs)
	if err != nil {
		return invalid(c, res, asJSON, "startup_log_invalid", err)
	}
	ev, arts, err := writeEvidence(rep, cfg, bind, f.evidenceDir)
	if err == nil {
		err = storeStartupLogs(rep, ev, logs, f.evidenceDir)
	}
	if err != nil {
		return cli.Failed(err)
	}
	if asJSON {
		return writeJSON(c.OutOrStdout(), red, res, rep, ev, arts)
	}
	check.WriteText(c.OutOrStdout(), rep)
	for _, e := range ev {
		fmt.Fprintf(c.OutOrStdout(), "evidence: %s execution %s state %s\n", e.Engine, e.Execution, orNone(e.State))
	}
	if !rep.Passed() {
		return cli.Silent(cli.ExitFailed)
	}
	return nil
}

// startupLogs reads the --startup-log flags: IID=PATH, an engine of the
// fleet, a file that opens.
func startupLogs(cfg *fleet.Config, flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, fl := range flags {
		iid, path, ok := strings.Cut(fl, "=")
		if !ok || iid == "" || path == "" {
			return nil, fmt.Errorf("--startup-log %q: write IID=PATH, for example p0=/var/log/vllm-p0.log", fl)
		}
		if !slices.Contains(cfg.IIDs(), iid) {
			return nil, fmt.Errorf("--startup-log %s: no engine %q in the fleet (engines: %s)", fl, iid, strings.Join(cfg.IIDs(), ", "))
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--startup-log %s: %w", fl, err)
		}
		out[iid] = path
	}
	return out, nil
}

// storeStartupLogs stores each engine's startup-log memory observations
// on the execution preflight bound it to (reference/evidence.md §2.10).
func storeStartupLogs(rep *check.Report, ev []engineEvidence, logs map[string]string, dir string) error {
	if dir == "" {
		return nil
	}
	st := store.Open(dir)
	for i, e := range ev {
		path, ok := logs[e.Engine]
		if !ok {
			continue
		}
		if e.Execution == "" {
			return fmt.Errorf("--startup-log %s=%s: preflight bound no execution to %s, so its observations have nothing to join", e.Engine, path, e.Engine)
		}
		recs, err := observationRecords(path, e.Engine, e.Execution, rep.Live[e.Engine].Version)
		if err != nil {
			return err
		}
		for _, r := range recs {
			d, err := st.PutRecord(r)
			if err != nil {
				return fmt.Errorf("--startup-log %s: %w", path, err)
			}
			ev[i].Records = append(ev[i].Records, d)
		}
	}
	return nil
}

func observationRecords(path, iid, execution, engineVersion string) ([]evidence.Record, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--startup-log %s: %w", path, err)
	}
	defer fh.Close()
	log, err := memory.ParseVLLMLog(fh, memory.VLLMLogOptions{})
	if err != nil {
		return nil, fmt.Errorf("--startup-log %s: %w", path, err)
	}
	var out []evidence.Record
	for _, o := range log.Observations {
		r, err := memory.ObservationRecord(o, execution, map[string]string{evidence.SubjectEndpoint: execution}, engineVersion,
			"narwhal-check", version.String(), filepath.Base(path), ports.SystemClock())
		if err != nil {
			return nil, fmt.Errorf("--startup-log %s (engine %s): %w", path, iid, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func loadProfiles(path string) (*profile.Store, error) {
	st, err := profile.Load(path)
	if err != nil {
		return nil, fmt.Errorf("profiles.path %s: %w", path, err)
	}
	return st, nil
}

func invalid(c *cobra.Command, res cmdresult.Result, asJSON bool, code string, err error) error {
	if !asJSON {
		return cli.Invalid(err)
	}
	res.Status = cmdresult.InvalidInput
	res.Errors = []cmdresult.Problem{{Code: code, Message: err.Error(), Command: res.Command, Stage: "input"}}
	if werr := res.Write(c.OutOrStdout(), cmdresult.NewRedactor(os.Environ())); werr != nil {
		return cli.Failed(werr)
	}
	fmt.Fprintf(c.ErrOrStderr(), "%s: %v\n", c.CommandPath(), err)
	return cli.Silent(cli.ExitInvalid)
}

// engineEvidence is one engine's line in JSON data.evidence.
type engineEvidence struct {
	Engine    string   `json:"engine"`
	Execution string   `json:"execution_fingerprint"`
	State     string   `json:"state"`
	States    []string `json:"states"`
	Records   []string `json:"records"`
}

// planBinding reads the --plan prediction record; none binds nothing.
func planBinding(dir, plan string) (check.Binding, error) {
	if plan == "" {
		return check.Binding{}, nil
	}
	if dir == "" {
		return check.Binding{}, fmt.Errorf("--plan needs --evidence-store: the prediction record is read from it")
	}
	rec, _, err := store.Open(dir).Get(plan)
	if err != nil {
		return check.Binding{}, fmt.Errorf("--plan %s: %w", plan, err)
	}
	return check.BindingFromPlan(rec, plan)
}

// writeEvidence stores the run's records; with dir "" they are built
// (and reported) but not written.
func writeEvidence(rep *check.Report, cfg *fleet.Config, bind check.Binding, dir string) ([]engineEvidence, []cmdresult.Artifact, error) {
	ee, err := check.EvidenceBound(rep, cfg, bind, ports.SystemClock(), version.String())
	if err != nil {
		return nil, nil, err
	}
	var out []engineEvidence
	var arts []cmdresult.Artifact
	st := store.Open(dir)
	for _, e := range ee {
		row := engineEvidence{Engine: e.IID, Execution: e.Execution, State: e.State, States: append([]string{}, e.States...), Records: []string{}}
		for _, r := range e.Records {
			d, err := r.Digest()
			if err == nil && dir != "" {
				d, err = st.PutRecord(r)
				arts = append(arts, cmdresult.Artifact{Kind: "evidence_record", Path: dir + "/records/" + d + ".json", State: "created"})
			}
			if err != nil {
				return nil, nil, fmt.Errorf("evidence record for engine %s: %w", e.IID, err)
			}
			row.Records = append(row.Records, d)
		}
		out = append(out, row)
	}
	return out, arts, nil
}

func writeJSON(w io.Writer, red *cmdresult.Redactor, res cmdresult.Result, rep *check.Report, ev []engineEvidence, arts []cmdresult.Artifact) error {
	res.Status = cmdresult.Success
	if !rep.Passed() {
		res.Status = cmdresult.FailedGate
	}
	for _, g := range rep.Gates {
		for _, l := range g.Lines {
			if l.Status == check.Fail {
				p := cmdresult.Problem{Code: "gate_failed", Message: l.Message, Command: res.Command, Stage: "preflight", Engine: l.Engine,
					Context: map[string]any{"gate": g.Name}}
				if l.FailureKind != "" {
					p.Context["failure_kind"] = l.FailureKind
				}
				res.Errors = append(res.Errors, p)
			}
		}
	}
	res.Data = map[string]any{"failed": rep.Failed, "skipped": rep.Skipped, "warnings": rep.Warnings, "gates": rep.Gates,
		"summary": rep.Summary(), "evidence": ev}
	res.Artifacts = arts
	if err := res.Write(w, red); err != nil {
		return cli.Failed(err)
	}
	if !rep.Passed() {
		return cli.Silent(cli.ExitFailed)
	}
	return nil
}
