package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/cmdresult"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/support"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/ports"
)

type planFlags struct {
	req        planner.Request
	marginGiB  float64
	format     string
	storeDir   string
	compareLog string
	cpuArch    string
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	c := &cobra.Command{
		Use:   "plan --model-dir DIR --gpu NAME [flags]",
		Short: "Predict, without a GPU, whether a model fits: weights per GPU, KV tokens, feasible max_model_len",
		Long:  planLong,
		Example: `  narwhal plan --model-dir /models/Llama-3.1-8B-Instruct --gpu h100-sxm
  narwhal plan --model-dir /models/Llama-3.1-70B --gpu a100-80gb --tp 4 --max-model-len 32768
  narwhal plan --model-dir /models/Llama-3.1-70B --gpu h100-sxm --tp 8
  narwhal plan --model-dir /models/Qwen3-30B-A3B --gpu h100-sxm --dp 8 --enable-expert-parallel
  narwhal plan --model-dir /models/m --gpu-memory-gib 48 --format json
  narwhal plan --model-dir /models/m --gpu l40s --compare-log vllm-startup.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPlan(cmd, f) },
	}
	planFlagsOn(c.Flags(), &f)
	return c
}

// planLong is plan's help text.
const planLong = `Read the model's safetensors headers (never its weights) and config.json,
and predict per GPU what vLLM will do with it: weight bytes each rank
loads, the activation, non-torch and CUDA-graph memory with their
uncertainty band, the memory left for the KV cache under
--gpu-memory-utilization, how many KV tokens and blocks that holds, the
largest feasible --max-model-len and the concurrency at it.

Parallel layouts follow vLLM: --tp splits attention and dense layers,
--pp splits the layers into stages, --dp runs that many replicas, each
holding a full TP copy of the non-expert weights. A fused-MoE layer spans
all TP × DP GPUs: with --enable-expert-parallel each EP = TP × DP rank
holds experts/EP whole experts (the first experts % EP ranks one more),
without it every expert is split TP × DP ways. Every figure is per GPU
(the heaviest rank), never summed over DP ranks; the layout needs
TP × PP × DP GPUs. With DP > 1 the non-torch memory has no calibration,
so the plan is unknown with that reason, but weights and KV bytes per
token are still derived per rank.

Every figure says how it is known: derived from the headers, predicted by
a formula calibrated against measured startup logs (named by digest), or
unknown with the reason — a mechanism or method this build does not
implement is never filled with a plausible constant.

The prediction is written to the evidence store (--store) as a
calculated-only record, and its tier comes from what the store holds:
Candidate from a prediction alone; Conservative only with a healthy boot
record on the same hardware class. --compare-log LOG prints the
prediction next to a vLLM startup log, figure by figure, with the error
of each.

Exit codes: 0 the plan was made (whether or not the model fits), 1 the
store could not be written, 2 bad input (a malformed header, an unknown
GPU, an unsupported vLLM version); nothing is written on bad input.`

// planFlagsOn declares plan's flags on fl, bound to f.
func planFlagsOn(fl *pflag.FlagSet, f *planFlags) {
	l := &f.req.Launch
	fl.StringVar(&f.req.ModelDir, "model-dir", "", "the model directory: config.json and *.safetensors (sharded with model.safetensors.index.json or not)")
	fl.StringVar(&f.req.GPU, "gpu", "", "GPU name from the built-in table (h100-sxm, a100-80gb, l40s, rtx-4090, …)")
	fl.Float64Var(&f.req.GPUMemoryGiB, "gpu-memory-gib", 0, "total memory per GPU in GiB, for a card the table lacks (overrides the table's)")
	fl.IntVar(&l.TP, "tp", 1, "tensor-parallel size")
	fl.IntVar(&l.PP, "pp", 1, "pipeline-parallel size")
	// --dp and --enable-expert-parallel are vLLM's --data-parallel-size and
	// --enable-expert-parallel:
	// https://github.com/vllm-project/vllm/blob/99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b/vllm/engine/arg_utils.py
	fl.IntVar(&l.DP, "dp", 1, "data-parallel size (vLLM --data-parallel-size): DP ranks of TP × PP GPUs each; figures stay per GPU")
	fl.BoolVar(&l.EnableExpertParallel, "enable-expert-parallel", false, "vLLM --enable-expert-parallel: MoE experts placed whole over EP = TP × DP ranks (without it they split TP × DP ways)")
	fl.Int64Var(&l.MaxModelLen, "max-model-len", 0, "context length to plan for (0: the model's max_position_embeddings)")
	fl.Float64Var(&l.GPUMemoryUtilization, "gpu-memory-utilization", 0, "fraction of each GPU's total memory vLLM may use (0: the version's default)")
	fl.StringVar(&l.KVCacheDType, "kv-cache-dtype", "", "auto, fp8, fp8_e4m3 or fp8_e5m2 (empty: auto)")
	fl.Int64Var(&l.MaxNumSeqs, "max-num-seqs", 0, "maximum concurrent sequences (0: the version's default)")
	fl.Int64Var(&l.MaxNumBatchedTokens, "max-num-batched-tokens", 0, "tokens per scheduler step (0: the version's default)")
	fl.BoolVar(&l.EnforceEager, "enforce-eager", false, "no CUDA graphs (their memory is then zero)")
	fl.StringVar(&f.req.VLLMVersion, "vllm-version", planner.DefaultVLLMVersion, "vLLM version whose memory accounting to follow")
	fl.Float64Var(&f.marginGiB, "margin-gib", 0, "stated safety margin the plan must keep, in GiB (0: the prediction's uncertainty band)")
	fl.BoolVar(&f.req.HashAll, "hash-weights", false, "hash every file for the artifact identity (reads the weights; off: only sidecar digests)")
	cli.FormatFlag(fl, &f.format)
	fl.StringVar(&f.storeDir, "store", "evidence", "evidence store directory the prediction record is written to")
	fl.StringVar(&f.compareLog, "compare-log", "", "a vLLM startup log to compare the prediction with, figure by figure")
	fl.StringVar(&f.cpuArch, "cpu-arch", hostCPUArch(), "CPU architecture of the serving host (x86_64, aarch64), for the engine support state")
}

func runPlan(cmd *cobra.Command, f planFlags) error {
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	if err := checkLayout(f.req.Launch); err != nil {
		return err
	}
	if f.marginGiB < 0 {
		return cli.Usage("--margin-gib must be ≥ 0, got %v", f.marginGiB)
	}
	f.req.MarginBytes = int64(f.marginGiB * (1 << 30))
	clock := ports.SystemClock()
	res, err := planner.Plan(f.req, clock)
	if err != nil {
		return planError(err)
	}
	var cmp []planComparison
	var observed []memory.Observation
	if f.compareLog != "" {
		if cmp, observed, err = compareLog(f.compareLog, res); err != nil {
			return err
		}
	}
	sup, err := planner.Support(store.Open(f.storeDir), res, f.cpuArch)
	if err != nil {
		return cli.Failed(err)
	}
	out, err := planner.Save(store.Open(f.storeDir), res, clock)
	if err != nil {
		return cli.Failed(err)
	}
	for _, o := range observed {
		rec, err := res.ObservationRecord(o, filepath.Base(f.compareLog), clock)
		if err == nil {
			_, err = store.Open(f.storeDir).PutRecord(rec)
		}
		if err != nil {
			return cli.Failed(fmt.Errorf("--compare-log %s: store the observation: %w", f.compareLog, err))
		}
	}
	graph, cands, err := planner.StoredCandidates(store.Open(f.storeDir), res)
	if err != nil {
		return cli.Failed(err)
	}
	if f.format == "json" {
		return writePlanJSON(cmd.OutOrStdout(), res, out, cmp, f.storeDir, sup, planCandidates{Graph: graph, Candidates: cands})
	}
	writeSupportFirst(cmd.OutOrStdout(), "narwhal plan", sup)
	writePlanText(cmd.OutOrStdout(), res, out, f.storeDir)
	writeComparisons(cmd.OutOrStdout(), cmp)
	if graph != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "candidates: %d of this lineage in the stored graph %s (narwhal evidence candidates)\n", len(cands), shortDigest(graph))
	}
	return nil
}

// planCandidates is the stored candidate graph of the plan's lineage.
type planCandidates struct {
	Graph      string              `json:"graph"`
	Candidates []planner.Candidate `json:"candidates"`
}

// checkLayout refuses a parallel size below 1 (vLLM's sizes are ≥ 1; 0
// would otherwise silently mean the default).
func checkLayout(l memory.LaunchConfig) error {
	for _, s := range []struct {
		flag string
		v    int
	}{{"--tp", l.TP}, {"--pp", l.PP}, {"--dp", l.DP}} {
		if s.v < 1 {
			return cli.Usage("%s must be ≥ 1, got %d", s.flag, s.v)
		}
	}
	return nil
}

func planError(err error) error {
	if planner.IsInputError(err) {
		return cli.Invalid(err)
	}
	return cli.Failed(err)
}

// planComparison is one startup-log observation beside the prediction.
type planComparison struct {
	Rank    *int                 `json:"rank"`
	Figures []memory.FigureError `json:"figures"`
}

// compareLog reads a startup log's observations and compares each with
// the prediction; the observations are stored beside the plan.
func compareLog(path string, res planner.Result) ([]planComparison, []memory.Observation, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, cli.Invalid(fmt.Errorf("--compare-log %s: %w", path, err))
	}
	defer fh.Close()
	total := res.GPU.TotalMemoryBytes
	log, err := memory.ParseVLLMLog(fh, memory.VLLMLogOptions{GPUTotalBytes: &total})
	if err != nil {
		return nil, nil, cli.Invalid(fmt.Errorf("--compare-log %s: %w", path, err))
	}
	var out []planComparison
	for _, o := range log.Observations {
		out = append(out, planComparison{Rank: o.Rank, Figures: memory.Compare(res.Prediction, o)})
	}
	return out, log.Observations, nil
}

func writePlanJSON(w io.Writer, res planner.Result, out planner.Outcome, cmp []planComparison, dir string, sup *support.Entry, cands planCandidates) error {
	data := map[string]any{
		"prediction": res.Prediction, "quantization": res.Quantization, "quantization_support": res.QuantVerdict,
		"artifact_identity": res.Local.Identity, "identity_unresolved": res.Local.Unresolved, "lineage": res.Lineage,
		"execution": res.Execution, "execution_fingerprint": res.ExecutionFP, "stated_margin_bytes": res.StatedMargin,
		"record": out.RecordDigest, "source_record": out.SourceDigest, "tier": out.Tier, "prior_evidence": out.Priors, "warnings": res.Warnings,
		"comparisons": cmp, "engine_support": sup, "candidates": cands,
	}
	r := cmdresult.Result{Command: "narwhal plan", Operation: "plan", Status: cmdresult.Success, Data: data,
		Artifacts: []cmdresult.Artifact{{Kind: "evidence_record", Path: dir + "/" + out.RecordDigest, State: "created"}}}
	return r.Write(w, nil)
}

func joinOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, "; ")
}
