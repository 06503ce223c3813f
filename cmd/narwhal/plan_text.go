package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/planner"
	"github.com/narwhal-go/narwhal/internal/units"
)

// writePlanText is the human summary: the verdict first, then how each
// figure is known.
func writePlanText(w io.Writer, res planner.Result, out planner.Outcome, dir string) {
	p := res.Prediction
	hw := p.Hardware
	fmt.Fprintf(w, "narwhal plan: %s (%s, %s) on %d × %s (%s, %s), vLLM %s (pinned facts %s)\n",
		p.Architecture, p.Mechanism, p.FFN, hw.Count, hw.Name, units.GiB(hw.TotalMemoryBytes), hw.MemoryBasis, res.FactsVersion, p.EngineVersion)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("fits", verdictLine(p, res.StatedMargin))
	row("layout", layoutLine(p))
	row("requested", fmt.Sprintf("%s per GPU (%.2f × total)", units.GiB(p.RequestedBytes), p.Launch.GPUMemoryUtilization))
	row("weights", component(p.WeightBytesPerRank)+" per GPU")
	row("activation peak", component(p.ActivationPeak))
	row("non-torch", component(p.NonTorch))
	graph := component(p.CUDAGraphEstimate)
	if !p.CUDAGraphApplied {
		graph += " (not subtracted from the KV budget by this version)"
	}
	row("CUDA graphs", graph)
	row("KV cache", component(p.AvailableKVBytes)+" per GPU")
	if p.Status == memory.PredictionKnown {
		row("KV tokens", fmt.Sprintf("%d (%d blocks of %d; %d bytes per token per GPU)", p.KVCapacityTokens, p.NumBlocks, p.BlockSize, p.KVBytesPerToken))
		row("max_model_len", fmt.Sprintf("%d feasible; planned %d; %.2f× concurrency at %d tokens",
			p.MaxFeasibleModelLen, p.Launch.MaxModelLen, p.MaxConcurrencyAtMaxLen, p.Launch.MaxModelLen))
	}
	row("quantization", quantLine(res))
	row("artifact", identityLine(res))
	row("lineage", res.Lineage.TensorSetDigest)
	row("execution", fmt.Sprintf("%s (not known: %s)", short(res.ExecutionFP), joinOr(res.Execution.MissingFields, "nothing")))
	tier := string(out.Tier.Tier)
	if len(out.Tier.Missing) > 0 {
		tier += fmt.Sprintf(" (next tier needs: %s)", joinRequirements(out.Tier))
	}
	row("tier", tier)
	row("prior evidence", priorLine(out))
	row("record", fmt.Sprintf("%s in %s", out.RecordDigest, dir))
	if len(p.UnknownReasons) > 0 {
		row("unknown", strings.Join(p.UnknownReasons, "; "))
	}
	for _, n := range p.Notes {
		row("note", n)
	}
	for _, warn := range res.Warnings {
		row("warning", warn)
	}
	tw.Flush()
}

func verdictLine(p memory.Prediction, stated int64) string {
	switch {
	case p.Status != memory.PredictionKnown:
		return "unknown — the prediction depends on something this build cannot compute (see unknown below)"
	case !p.Fits:
		return fmt.Sprintf("NO — short by %s per GPU", units.GiB(-p.MarginBytes))
	case p.MarginBytes < stated:
		return fmt.Sprintf("yes, but the margin %s is below the stated %s", units.GiB(p.MarginBytes), units.GiB(stated))
	}
	return fmt.Sprintf("yes, margin %s (stated %s)", units.GiB(p.MarginBytes), units.GiB(stated))
}

// component prints a figure with how it is known and its band.
func component(c memory.Component) string {
	switch c.Status {
	case memory.StatusUnknown:
		return "unknown: " + c.Reason
	case memory.StatusDerived:
		return units.GiB(c.Bytes) + " (derived from the headers)"
	}
	return fmt.Sprintf("%s (predicted, %s – %s)", units.GiB(c.Bytes), units.GiB(c.Lower), units.GiB(c.Upper))
}

func quantLine(res planner.Result) string {
	q, v := res.Quantization, res.QuantVerdict
	method := q.Method
	if method == "" {
		method = "native"
	}
	s := fmt.Sprintf("%s, weights %s (%s)", method, q.WeightFormat, v.Support)
	if v.Reason != "" {
		s += ": " + v.Reason
	}
	return s
}

func identityLine(res planner.Result) string {
	if id := res.Local.Identity; id != nil {
		return id.ContentDigest
	}
	return "identity unresolved (" + res.Local.Reason + "); records name it by lineage, which is not identity"
}

func priorLine(out planner.Outcome) string {
	if len(out.Priors) == 0 {
		return "no measurement of this artifact in the store"
	}
	var parts []string
	for _, m := range out.Priors {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", short(m.PriorRecord), m.Label, m.Freshness))
	}
	return strings.Join(parts, "; ")
}

func joinRequirements(d evidence.Decision) string {
	var s []string
	for _, m := range d.Missing {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	return d
}

// writeComparisons prints each logged rank's figures beside the
// prediction with the error of each.
func writeComparisons(w io.Writer, cmp []planComparison) {
	for _, c := range cmp {
		rank := "rank unknown"
		if c.Rank != nil {
			rank = fmt.Sprintf("rank %d", *c.Rank)
		}
		fmt.Fprintf(w, "\ncompared with the log (%s):\n", rank)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  figure\tpredicted\tlogged\terror\n")
		for _, f := range c.Figures {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Figure, figure(f.Predicted, f.Unit), figure(f.Logged, f.Unit), figureError(f))
		}
		tw.Flush()
	}
}

func figure(v *float64, u memory.FigureUnit) string {
	switch {
	case v == nil:
		return "unknown"
	case u == memory.UnitBytes:
		return fmt.Sprintf("%.3f GiB", *v/(1<<30))
	case u == memory.UnitRatio:
		return fmt.Sprintf("%.2f×", *v)
	}
	return fmt.Sprintf("%.0f", *v)
}

func figureError(f memory.FigureError) string {
	if !f.Compared || f.RelError == nil {
		return "— " + string(f.Reason)
	}
	return fmt.Sprintf("%+.1f%%", *f.RelError*100)
}

// layoutLine names the parallel layout and that every figure is per GPU.
func layoutLine(p memory.Prediction) string {
	l := p.Launch
	ep := "no expert parallel"
	if l.EnableExpertParallel {
		ep = fmt.Sprintf("expert parallel over %d ranks", l.TP*l.DP)
	}
	return fmt.Sprintf("tp %d × pp %d × dp %d = %d GPUs, %s; figures per GPU", l.TP, l.PP, l.DP, p.GPUsNeeded, ep)
}
