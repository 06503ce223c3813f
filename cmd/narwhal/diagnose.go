package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/support"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/ports"
)

type diagnoseFlags struct {
	planPath, gpu, modelDir, fleetPath, engine, format, storeDir, vllmVersion, cpuArch string
	gpuGiB                                                                             float64
	needMaxLen                                                                         int64
}

func newDiagnoseCmd() *cobra.Command {
	var f diagnoseFlags
	c := &cobra.Command{
		Use:   "diagnose LOGFILE|- [--plan PLAN] [--gpu NAME] [--model-dir D] [--fleet F] [flags]",
		Short: "Name a vLLM engine's failure from its log and compute a corrected launch plan",
		Long: `Read a vLLM engine log (a file, or - for stdin; any size, streamed), name
the failure in it — its family from a closed taxonomy, its fingerprint
(exception class, engine call-site module, family) and the typed facts the
log states — and compute corrected launch plans from those facts, the
operator's plan (--plan, or the fleet's with --fleet), the GPU (--gpu) and,
with --model-dir, the memory calculator.

Nothing read from the log reaches a rendered command: the log yields
numbers and closed enumerations only, and a command is rendered from the
typed plan. Every correction says how each value was computed, what it
costs (its trade-offs) and which fleet requirements it violates; they are
ranked, least costly first. A correction starts as a hypothesis: its
public result is "Unverified suggestion" until a corrected boot proves it
(narwhal diagnose prove).

The failure record (recognized or unrecognized, with the sanitized facts)
and one remediation application record per correction are written to the
evidence store (--store).

Exit codes: 0 the log was diagnosed (whatever it shows, an unrecognized
failure included), 1 the log could not be read to the end or the store
could not be written, 2 bad input (no such log, a malformed plan or fleet,
an unknown GPU); nothing is written on bad input.`,
		Example: `  narwhal diagnose vllm.log --gpu l4
  narwhal diagnose vllm.log --plan plan.json --gpu l4 --need-max-model-len 32768
  kubectl logs engine-0 | narwhal diagnose - --fleet fleet.json --engine e0 --format json
  narwhal diagnose prove --application <id> --boot-log corrected.log`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runDiagnose(cmd, f, args[0]) },
	}
	fl := c.Flags()
	fl.StringVar(&f.planPath, "plan", "", "the broken launch plan: a narwhal.diagnose.plan file, or a launch.json that narwhal-engine plan wrote")
	fl.StringVar(&f.gpu, "gpu", "", "GPU name from the built-in table (l4, h100-sxm, a100-80gb, t4, …): bounds the log's figures and sizes corrections")
	fl.Float64Var(&f.gpuGiB, "gpu-memory-gib", 0, "total memory per GPU in GiB (overrides --gpu's, or names a card the table lacks)")
	fl.StringVar(&f.modelDir, "model-dir", "", "the model directory (config.json, *.safetensors headers): lets corrections run the memory calculator")
	fl.StringVar(&f.fleetPath, "fleet", "", "the fleet document: its requirements (SLO, model, tensor_parallel, engine contract) judge the corrections")
	fl.StringVar(&f.engine, "engine", "", "with --fleet and no --plan: the engine iid whose launch failed (its port)")
	fl.Int64Var(&f.needMaxLen, "need-max-model-len", 0, "the context the fleet needs: a correction below it violates the request (0: not stated)")
	fl.StringVar(&f.vllmVersion, "vllm-version", "", "the vLLM version whose memory accounting --model-dir follows (default: the log's, else "+planner.DefaultVLLMVersion+")")
	cli.FormatFlag(fl, &f.format)
	fl.StringVar(&f.storeDir, "store", "evidence", "evidence store directory the records are written to")
	fl.StringVar(&f.cpuArch, "cpu-arch", hostCPUArch(), "CPU architecture of the failed engine's host (x86_64, aarch64), for the engine support state")
	c.AddCommand(newDiagnoseProveCmd())
	return c
}

// diagnoseInputs are the operator's inputs besides the log.
type diagnoseInputs struct {
	plan       *plan.Plan
	modelDir   string
	unmodelled []string
	fleet      *fleet.Config
	hw         *memory.HardwareSpec
	gpuTotal   *int64
	req        diagnose.Requirements
}

func loadDiagnoseInputs(f diagnoseFlags) (diagnoseInputs, error) {
	var in diagnoseInputs
	if err := cli.CheckFormat(f.format); err != nil {
		return in, err
	}
	switch {
	case f.needMaxLen < 0 || f.needMaxLen > plan.MaxModelLenLimit:
		return in, cli.Usage("--need-max-model-len %d: want 0 (not stated) or 1..%d", f.needMaxLen, plan.MaxModelLenLimit)
	case f.gpuGiB < 0:
		return in, cli.Usage("--gpu-memory-gib must be > 0, got %v", f.gpuGiB)
	case f.engine != "" && f.fleetPath == "":
		return in, cli.Usage("--engine names an engine of --fleet: give the fleet document too")
	}
	if err := in.readPlan(f); err != nil {
		return in, cli.Invalid(err)
	}
	if err := in.readGPU(f); err != nil {
		return in, cli.Invalid(err)
	}
	in.req = diagnose.FleetRequirements(in.fleet, f.needMaxLen)
	return in, nil
}

func (in *diagnoseInputs) readPlan(f diagnoseFlags) error {
	if f.fleetPath != "" {
		cfg, err := fleet.Load(f.fleetPath)
		if err != nil {
			return err
		}
		in.fleet = cfg
	}
	in.modelDir = f.modelDir
	switch {
	case f.planPath != "":
		b, err := os.ReadFile(f.planPath)
		if err != nil {
			return fmt.Errorf("--plan: %w", err)
		}
		pf, err := plan.Parse(b)
		if err != nil {
			return fmt.Errorf("--plan %s: %w", f.planPath, err)
		}
		in.plan, in.unmodelled = &pf.Plan, pf.Unmodelled
		if in.modelDir == "" {
			in.modelDir = pf.ModelDir
		}
	case in.fleet != nil:
		p, err := plan.FromFleet(in.fleet, f.engine)
		if err != nil {
			return fmt.Errorf("--fleet %s: %w", f.fleetPath, err)
		}
		in.plan = &p
	}
	return nil
}

func (in *diagnoseInputs) readGPU(f diagnoseFlags) error {
	count := 1
	if in.plan != nil && in.plan.TensorParallelSize > 0 {
		count = in.plan.TensorParallelSize
	}
	hw, err := memory.ResolveHardware(f.gpu, f.gpuGiB, count)
	if err != nil || hw.TotalMemoryBytes == 0 {
		return err
	}
	total := hw.TotalMemoryBytes
	in.hw, in.gpuTotal = &hw, &total
	return nil
}

// options names the GPU to the diagnosis only when the table knows it: a
// card the table lacks, given with --gpu-memory-gib, is checked by its
// memory alone, as plan takes it (memory.ResolveHardware is the one
// resolver).
func (in diagnoseInputs) options(f diagnoseFlags) diagnose.Options {
	opt := diagnose.Options{GPU: f.gpu, GPUTotalBytes: in.gpuTotal}
	if _, err := memory.LookupGPU(f.gpu); err != nil {
		opt.GPU = ""
	}
	return opt
}

// diagnoseRun is one diagnosis and what it wrote.
type diagnoseRun struct {
	diag          diagnose.Diagnosis
	remedy        diagnose.Remedy
	logDigest     string
	failure       *diagnose.FailureRecord
	failureDigest string
	apps          []diagnose.Application
	appDigests    []string
	ruleStatus    diagnose.RuleStatus // the rule's status for the log's engine minor, from the store
	support       *support.Entry      // the engine support state, nil when not derivable
	warnings      []string
}

func runDiagnose(cmd *cobra.Command, f diagnoseFlags, logArg string) error {
	in, err := loadDiagnoseInputs(f)
	if err != nil {
		return err
	}
	r, closeLog, err := openLog(logArg, cmd.InOrStdin())
	if err != nil {
		return cli.Invalid(err)
	}
	defer closeLog()
	clock := ports.SystemClock()
	var run diagnoseRun
	if run.diag, run.logDigest, err = diagnoseStream(r, in.options(f)); err != nil {
		return cli.Failed(fmt.Errorf("%s: %w", logName(logArg), err))
	}
	model, warn, err := calculatorInput(in, f, run.diag, clock)
	if err != nil {
		return err
	}
	run.warnings = append(run.warnings, warn...)
	run.warnings = append(run.warnings, unmodelledWarning(in.unmodelled)...)
	if run.remedy, err = diagnose.Remediate(run.diag, diagnose.Input{Plan: in.plan, GPU: in.hw, Model: model, Requirements: in.req}); err != nil {
		return cli.Invalid(err)
	}
	st := store.Open(f.storeDir)
	if run.ruleStatus, err = diagnose.RuleStatusOf(st, run.diag); err != nil {
		return cli.Failed(fmt.Errorf("store: %w", err))
	}
	if err := run.write(st, in.req, clock); err != nil {
		return cli.Failed(err)
	}
	if run.support, err = diagnoseSupport(st, f, in, run, model, clock); err != nil {
		return cli.Failed(err)
	}
	if f.format == "json" {
		return writeDiagnoseJSON(cmd.OutOrStdout(), run, f.storeDir)
	}
	writeDiagnoseText(cmd.OutOrStdout(), run, f.storeDir)
	return nil
}

// openLog opens LOGFILE, or stdin for "-".
func openLog(arg string, stdin io.Reader) (io.Reader, func(), error) {
	if arg == "-" {
		return stdin, func() {}, nil
	}
	fh, err := os.Open(arg)
	if err != nil {
		return nil, nil, fmt.Errorf("log: %w", err)
	}
	return fh, func() { _ = fh.Close() }, nil
}

func logName(arg string) string {
	if arg == "-" {
		return "stdin"
	}
	return arg
}

// diagnoseStream diagnoses r in one streaming pass and digests every byte
// of it (the scanner may stop reading before the end).
func diagnoseStream(r io.Reader, opt diagnose.Options) (diagnose.Diagnosis, string, error) {
	h := sha256.New()
	d, err := diagnose.Diagnose(io.TeeReader(r, h), opt)
	if err != nil {
		return d, "", err
	}
	if _, err := io.Copy(h, r); err != nil {
		return d, "", err
	}
	return d, digestOf(h), nil
}

func digestOf(h hash.Hash) string { return canon.DigestPrefix + hex.EncodeToString(h.Sum(nil)) }

// calculatorInput runs the model reader for --model-dir at the log's
// engine version when the calculator knows it.
func calculatorInput(in diagnoseInputs, f diagnoseFlags, d diagnose.Diagnosis, clock ports.Clock) (*memory.PlanInput, []string, error) {
	if in.modelDir == "" {
		return nil, nil, nil
	}
	v, warn := f.vllmVersion, []string(nil)
	if v == "" {
		v = planner.DefaultVLLMVersion
		if ev := d.Facts.EngineVersion; ev != nil {
			if _, _, err := memory.LoadFacts(ev.String()); err == nil {
				v = ev.String()
			} else {
				warn = append(warn, fmt.Sprintf("the calculator has no facts for the log's vLLM %s; it follows %s (pass --vllm-version)", ev, v))
			}
		}
	}
	req := planner.Request{ModelDir: in.modelDir, GPU: f.gpu, GPUMemoryGiB: f.gpuGiB, VLLMVersion: v}
	if in.plan != nil {
		req.Launch = in.plan.Launch()
	}
	mi, err := planner.CalculatorInput(req, clock)
	if err != nil {
		if planner.IsInputError(err) {
			return nil, nil, cli.Invalid(fmt.Errorf("--model-dir: %w", err))
		}
		return nil, nil, cli.Failed(fmt.Errorf("--model-dir: %w", err))
	}
	return &mi, warn, nil
}

func unmodelledWarning(flags []string) []string {
	if len(flags) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the plan's argv has flags diagnose does not model (%v): a rendered command omits them; apply the diff to your own command", flags)}
}

// write stores the failure record and one application per correction. A
// log that shows no failure writes nothing.
func (run *diagnoseRun) write(st *store.Store, req diagnose.Requirements, clock ports.Clock) error {
	if run.diag.Status == diagnose.StatusNoFailure {
		return nil
	}
	fr, err := diagnose.NewFailure(run.diag, run.remedy, run.logDigest)
	if err != nil {
		return err
	}
	rec, err := fr.Record(clock)
	if err != nil {
		return err
	}
	if run.failureDigest, err = st.PutRecord(rec); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	run.failure = &fr
	apps, recs, err := diagnose.Applications(run.diag, run.remedy, req, ports.RandomIDs(), clock, []string{run.logDigest, run.failureDigest})
	if err != nil {
		return err
	}
	run.apps = apps
	for _, r := range recs {
		d, err := st.PutRecord(r)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		run.appDigests = append(run.appDigests, d)
	}
	return nil
}

// putAll stores records in order and returns their digests.
func putAll(st *store.Store, recs ...evidence.Record) ([]string, error) {
	var out []string
	for _, r := range recs {
		d, err := st.PutRecord(r)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

var errNotVerified = errors.New("the corrected boot did not verify the fix")
