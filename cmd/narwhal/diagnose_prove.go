package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/diagnose"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

type proveFlags struct {
	application, bootLog, storeDir, format, gpu, serving string
}

func newDiagnoseProveCmd() *cobra.Command {
	var f proveFlags
	c := &cobra.Command{
		Use:   "prove --application ID --boot-log LOG [--store DIR]",
		Short: "Record the corrected engine's boot and derive the remediation's public result",
		Long: `Read the boot log of an engine launched with a correction narwhal diagnose
computed, record it as a corrected-boot record, and re-evaluate the
remediation application against the requirements it was accepted with.

mechanism_outcome is verified only for a healthy start of the corrected
plan (its KV cache allocated, the plan's values in the log, no failure)
without the original failure fingerprint; request_outcome is judged
against the accepted snapshot stored with the application (the context
the fleet needs, the pinned model, the engine shape and contract, the SLO
— a latency-changing diff needs --serving-record). The public result is
derived, never stored: Fixed (verified and satisfied), Alternative with
trade-offs (verified, a requirement violated), Unverified suggestion
(anything else). A verified mechanism also writes the rule's promotion for
the engine minor the boot ran.

Exit codes: 0 the mechanism is verified (Fixed or Alternative with
trade-offs), 1 it is not (the fix failed, or the log does not prove it) or
the store could not be written, 2 bad input (an unknown application, no
such boot log). The records are written in both the 0 and 1 cases.`,
		Example: `  narwhal diagnose prove --application 6f1c… --boot-log corrected.log
  narwhal diagnose prove --application 1220ab… --boot-log - --serving-record 1220cd… --format json < corrected.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProve(cmd, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.application, "application", "", "the application id narwhal diagnose printed, or an application record digest")
	fl.StringVar(&f.bootLog, "boot-log", "", "the corrected engine's startup log (a file, or - for stdin)")
	fl.StringVar(&f.storeDir, "store", "evidence", "evidence store holding the application; the proof records are written there")
	fl.StringVar(&f.gpu, "gpu", "", "GPU name from the built-in table: bounds the boot log's figures")
	fl.StringVar(&f.serving, "serving-record", "", "digest of a stored serving record of the corrected engine (narwhal-check's slo gate) for a latency-changing diff")
	cli.FormatFlag(fl, &f.format)
	return c
}

func runProve(cmd *cobra.Command, f proveFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	switch {
	case f.application == "":
		return cli.Usage("--application is required: the id narwhal diagnose printed")
	case f.bootLog == "":
		return cli.Usage("--boot-log is required: the corrected engine's startup log")
	}
	st := store.Open(f.storeDir)
	in, err := proofInput(st, f)
	if err != nil {
		return cli.Invalid(err)
	}
	log, closeLog, err := seekableLog(f.bootLog, cmd.InOrStdin())
	if err != nil {
		return cli.Invalid(err)
	}
	defer closeLog()
	in.BootLog = log
	pf, err := diagnose.Prove(in, ports.SystemClock())
	if err != nil {
		return cli.Failed(err)
	}
	recs := []evidence.Record{pf.BootRecord, pf.ApplicationRecord}
	if pf.Promotion != nil {
		recs = append(recs, *pf.Promotion)
	}
	digests, err := putAll(st, recs...)
	if err != nil {
		return cli.Failed(err)
	}
	if f.format == "json" {
		err = writeProveJSON(cmd.OutOrStdout(), pf, digests, f.storeDir)
	} else {
		writeProveText(cmd.OutOrStdout(), pf, f.storeDir)
	}
	if err != nil {
		return cli.Failed(err)
	}
	if pf.Application.MechanismOutcome != diagnose.MechanismVerified {
		if f.format == "json" {
			return cli.Silent(cli.ExitFailed)
		}
		return cli.Failed(fmt.Errorf("%w: %s", errNotVerified, pf.Application.MechanismReason))
	}
	return nil
}

// proofInput finds the application and the optional serving record.
func proofInput(st *store.Store, f proveFlags) (diagnose.ProofInput, error) {
	var in diagnose.ProofInput
	var err error
	if in.Application, in.ApplicationDigest, err = diagnose.FindApplication(st, f.application); err != nil {
		return in, fmt.Errorf("--application (store %s): %w", f.storeDir, err)
	}
	if f.gpu != "" {
		g, err := memory.LookupGPU(f.gpu)
		if err != nil {
			return in, err
		}
		total := g.TotalMemoryBytes
		in.Options = diagnose.Options{GPU: f.gpu, GPUTotalBytes: &total}
	}
	if f.serving != "" {
		r, _, err := st.Get(f.serving)
		if err != nil {
			return in, fmt.Errorf("--serving-record: %w", err)
		}
		s, err := diagnose.ServingFrom(r, f.serving)
		if err != nil {
			return in, fmt.Errorf("--serving-record: %w", err)
		}
		in.Serving = &s
	}
	return in, nil
}

// seekableLog opens the boot log; stdin is spooled to a temporary file
// (the proof reads the log twice, and a log may be larger than memory).
func seekableLog(arg string, stdin io.Reader) (io.ReadSeeker, func(), error) {
	if arg != "-" {
		fh, err := os.Open(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("--boot-log: %w", err)
		}
		return fh, func() { _ = fh.Close() }, nil
	}
	tmp, err := os.CreateTemp("", "narwhal-boot-log-*")
	if err != nil {
		return nil, nil, fmt.Errorf("--boot-log -: %w", err)
	}
	done := func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }
	if _, err := io.Copy(tmp, stdin); err != nil {
		done()
		return nil, nil, fmt.Errorf("--boot-log -: %w", err)
	}
	return tmp, done, nil
}

func writeProveText(w io.Writer, pf diagnose.Proof, dir string) {
	a, b := pf.Application, pf.Boot
	fmt.Fprintf(w, "application  %s (%s, correction %d)\n", a.ApplicationID, a.Family, a.Rank+1)
	for _, c := range a.PlanDiff {
		fmt.Fprintf(w, "  plan diff  %s\n", c)
	}
	fmt.Fprintf(w, "boot         %s: %d lines, KV cache %d tokens, serves max_model_len %d\n", bootVerdict(b), b.Lines, b.KVCacheTokens, b.ServedMaxModelLen)
	for _, c := range b.PlanChecks {
		fmt.Fprintf(w, "  checked    %s: planned %s, logged %s (%s)\n", c.Field.Path(), c.Planned, c.Logged, c.Outcome)
	}
	fmt.Fprintf(w, "mechanism    %s: %s\n", a.MechanismOutcome, a.MechanismReason)
	fmt.Fprintf(w, "request      %s\n", a.RequestOutcome)
	for _, c := range a.Constraints {
		fmt.Fprintf(w, "  %-10s %s: %s\n", c.Outcome, c.Requirement, c.Text)
	}
	for _, t := range a.TradeOffs {
		fmt.Fprintf(w, "  trade-off  %s: %s\n", t.Kind, t.Text)
	}
	fmt.Fprintf(w, "result       %s\n", pf.Result)
	fmt.Fprintf(w, "records      corrected boot %s, application %s (corrects the diagnosis's)", pf.BootDigest, pf.ApplicationDigest)
	if pf.Promotion != nil {
		fmt.Fprintf(w, ", rule promotion %s", pf.PromotionDigest)
	}
	fmt.Fprintf(w, " in %s\n", dir)
}

func bootVerdict(b diagnose.CorrectedBoot) string {
	switch {
	case b.Healthy:
		return "healthy"
	case b.OriginalFailure:
		return "the original failure recurred (" + string(b.Family) + ")"
	case b.Status != diagnose.StatusNoFailure:
		return "failed (" + string(b.Family) + ")"
	}
	return "no healthy start in the log"
}

func writeProveJSON(w io.Writer, pf diagnose.Proof, digests []string, dir string) error {
	arts := []cmdresult.Artifact{}
	for _, d := range digests {
		arts = append(arts, cmdresult.Artifact{Kind: "evidence_record", Path: dir + "/" + d, State: "created"})
	}
	status := cmdresult.Success
	if pf.Application.MechanismOutcome != diagnose.MechanismVerified {
		status = cmdresult.FailedGate
	}
	data := map[string]any{
		"result": pf.Result, "application": pf.Application, "corrected_boot": pf.Boot,
		"records": map[string]any{"corrected_boot": pf.BootDigest, "application": pf.ApplicationDigest, "rule_promotion": nilIfEmpty(pf.PromotionDigest)},
	}
	r := cmdresult.Result{Command: "narwhal diagnose prove", Operation: "prove", Status: status, Data: data, Artifacts: arts}
	return r.Write(w, nil)
}
