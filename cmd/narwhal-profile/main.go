// Command narwhal-profile measures each engine's prefill and decode curves
// and writes the narwhal.profiles store the router, preflight and the
// simulator price work with (operations.md §1.9, §6). Every row is bound to
// the engine process generation it measured.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
)

func main() { cli.Main(newRoot()) }

type flags struct {
	fleet, out, limits, format    string
	evidenceDir, router           string
	routerWait                    time.Duration
	engines                       []string
	merge, warm, quiet            bool
	prefillLens, decodeLens, conc string
	warmPrefixes, warmSuffixes    string
	prefillRepeats, decodeTokens  int
	timeoutS                      float64
	parsed                        sweep.Config
}

func newRoot() *cobra.Command {
	f := &flags{}
	root := cli.NewRoot("narwhal-profile", "Measure each engine's prefill and decode curves and write the profile store")
	root.Args = cobra.NoArgs
	root.RunE = func(c *cobra.Command, _ []string) error { return run(c, f) }
	fs := root.Flags()
	fs.StringVar(&f.fleet, "fleet", "", "fleet file (narwhal.fleet v1); required")
	fs.StringSliceVar(&f.engines, "engines", nil, "engine iids to profile, comma-separated (default: every engine)")
	fs.StringVar(&f.out, "out", "", "profile store to write (default: the fleet's profiles.path)")
	fs.BoolVar(&f.merge, "merge", false, "replace only the profiled engines' rows of the existing store")
	fs.StringVar(&f.router, "router", "", "a running router's base URL: after writing, wait until it has re-read the store (its /narwhal/state.profiles.digest), exit 1 if it has not")
	fs.DurationVar(&f.routerWait, "router-wait", 15*time.Second, "with --router: how long to wait for the router to take the store")
	fs.StringVar(&f.prefillLens, "prefill-lengths", "256,700,1024,1300,2300,4096,4300,8300,12300,16300", "cold prefill input lengths, filtered to each engine's max_model_len (≥ 3 usable)")
	fs.IntVar(&f.prefillRepeats, "prefill-repeats", 3, "repeats per prefill length (≥ 3); the fit uses the median")
	fs.StringVar(&f.decodeLens, "decode-lengths", "512,4096,8192", "decode input lengths (≥ 2 usable, each leaving 64 output tokens)")
	fs.StringVar(&f.conc, "concurrency", "1,4,16,48", "decode cohort sizes (≥ 2 usable after --limits)")
	fs.IntVar(&f.decodeTokens, "decode-tokens", 64, "tokens each decode stream generates (≥ 3)")
	fs.StringVar(&f.limits, "limits", "", "profiling limits file: per-engine max_num_seqs caps the concurrency")
	fs.BoolVar(&f.warm, "warm", false, "also measure warm prefill (needs --enable-prefix-caching --enable-prompt-tokens-details on the engines)")
	fs.StringVar(&f.warmPrefixes, "cached-prefix-lengths", "16,512,2048,8192", "warm sweep cached prefix lengths (≥ 2): from one 16-token block up to the context, as conversations cache them")
	fs.StringVar(&f.warmSuffixes, "cached-suffix-lengths", "16,128,700,2600", "warm sweep uncached suffix lengths (≥ 2): from a follow-up turn's few tokens")
	fs.Float64Var(&f.timeoutS, "observation-timeout-s", 300, "bound on one completion or decode cohort, seconds")
	fs.StringVar(&f.evidenceDir, "evidence-store", "evidence", "evidence store for one workload record per profiled engine; empty writes none")
	fs.StringVar(&f.format, "format", "text", "output: text or json (the narwhal.command-result envelope)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (off a terminal it is one line per step)")
	return root
}

func (f *flags) check() error {
	var err error
	c := &f.parsed
	if f.fleet == "" {
		return cli.Usage("--fleet is required: name the fleet file whose engines to profile")
	}
	if err := cli.CheckFormat(f.format); err != nil {
		return err
	}
	if err := checkRouterURL(f.router); err != nil {
		return err
	}
	for _, l := range []struct {
		name, v string
		dst     *[]int
		min     int
	}{{"--prefill-lengths", f.prefillLens, &c.PrefillLengths, 3}, {"--decode-lengths", f.decodeLens, &c.DecodeLengths, 2},
		{"--concurrency", f.conc, &c.Concurrency, 2}, {"--cached-prefix-lengths", f.warmPrefixes, &c.WarmPrefixes, 2},
		{"--cached-suffix-lengths", f.warmSuffixes, &c.WarmSuffixes, 2}} {
		if *l.dst, err = parseList(l.name, l.v, l.min); err != nil {
			return err
		}
	}
	switch {
	case f.prefillRepeats < 3:
		return cli.Usage("--prefill-repeats must be ≥ 3 (the fit takes each length's median), got %d", f.prefillRepeats)
	case f.decodeTokens < 3:
		return cli.Usage("--decode-tokens must be ≥ 3, got %d", f.decodeTokens)
	case !(f.timeoutS > 0):
		return cli.Usage("--observation-timeout-s must be > 0, got %v", f.timeoutS)
	}
	c.PrefillRepeats, c.DecodeTokens, c.Warm = f.prefillRepeats, f.decodeTokens, f.warm
	c.Timeout = time.Duration(f.timeoutS * float64(time.Second))
	return nil
}

// parseList reads a comma-separated list of positive integers with at
// least min distinct values.
func parseList(name, s string, min int) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return nil, cli.Usage("%s: %q is not a positive integer", name, p)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) < min {
		return nil, cli.Usage("%s needs ≥ %d distinct values, got %d", name, min, len(out))
	}
	return out, nil
}

// selectEngines returns the fleet engines named by --engines (all when
// empty); an unknown iid is bad input.
func selectEngines(cfg *fleet.Config, ids []string) ([]fleet.Engine, error) {
	if len(ids) == 0 {
		return cfg.Engines, nil
	}
	var out []fleet.Engine
	for _, id := range ids {
		i := slices.IndexFunc(cfg.Engines, func(e fleet.Engine) bool { return e.IID == id })
		if i < 0 {
			return nil, fmt.Errorf("--engines: %s is not an engine of the fleet", id)
		}
		out = append(out, cfg.Engines[i])
	}
	return out, nil
}

func signalContext(c *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
