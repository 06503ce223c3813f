package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/planner"
)

// evCandidatesCmd builds and stores the quantization candidate graph of
// local artifacts (reference/evidence.md §2.6).
func evCandidatesCmd(f *evFlags) *cobra.Command {
	var dirs []string
	var engine string
	var hashAll bool
	c := &cobra.Command{
		Use:   "candidates --model-dir D [--model-dir D2 ...] [--engine-version V]",
		Short: "Build and store the quantization candidate graph of local artifacts: specs, runtime transforms, relations their evidence supports",
		Long: `Build the quantization candidate graph of the artifacts in the given
directories (a checkpoint and its quantized siblings) and store it as one
metadata record. Each artifact becomes an ArtifactSpec by its resolved
identity (a directory needs SHA256SUMS or the Hugging Face cache layout,
or --hash-all); an unquantized one also gets the runtime FP8 transform the
engine version can apply. Relations come only from the specs' own
evidence (structure from lineage, tokenizer from equal digests); names and
locations create none. narwhal plan then lists the graph's candidates of
its artifact's lineage.

Exit codes: 0 stored, 1 no directory gave a candidate, 2 bad input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(dirs) == 0 {
				return cli.Usage("candidates: give at least one --model-dir")
			}
			g, err := planner.Candidates(dirs, engine, hashAll, f.clock())
			if err != nil {
				return cli.Failed(err)
			}
			if len(g.Candidates) == 0 {
				return cli.Failed(fmt.Errorf("no directory gave a candidate: %v", g.Refused))
			}
			rec, err := g.Record(f.clock())
			if err != nil {
				return cli.Failed(err)
			}
			d, err := f.open().PutRecord(rec)
			if err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "candidates", map[string]any{"record": d, "graph": g}, func(w io.Writer) { writeGraph(w, d, g) })
		},
	}
	c.Flags().StringSliceVar(&dirs, "model-dir", nil, "an artifact directory; repeat for each candidate")
	c.Flags().StringVar(&engine, "engine-version", planner.DefaultVLLMVersion, "vLLM version whose runtime transforms are considered")
	c.Flags().BoolVar(&hashAll, "hash-all", false, "hash every file (a directory without SHA256SUMS or the Hugging Face cache layout)")
	return c
}

func writeGraph(w io.Writer, d string, g planner.CandidateGraph) {
	fmt.Fprintf(w, "candidate graph %s: %d candidates, %d relations\n", d, len(g.Candidates), len(g.Relations))
	for _, c := range g.Candidates {
		rt := "none"
		if c.Runtime != nil {
			rt = c.Runtime.Kind
		}
		fmt.Fprintf(w, "  %s  %s  method %s (%s)  runtime transform %s\n", shortDigest(c.Fingerprint), c.Dir, c.Spec.Quantization.Method, c.Support.Support, rt)
	}
	for _, r := range g.Relations {
		fmt.Fprintf(w, "  relation %s %s → %s\n", r.Kind, shortDigest(r.From), shortDigest(r.To))
	}
	for _, r := range g.Refused {
		fmt.Fprintf(w, "  refused %s\n", r)
	}
}
