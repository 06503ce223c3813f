package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
)

func evTierCmd(f *evFlags) *cobra.Command {
	var fleetPath, request, plan string
	c := &cobra.Command{
		Use:   "tier --fleet F",
		Short: "Derive each endpoint's output tier with its basis and, for the next tier, exactly what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := judging(f, fleetPath)
			if err != nil {
				return err
			}
			in.Request, in.Plan = request, plan
			rep, err := tierd.Derive(in)
			if err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "tier", rep, func(w io.Writer) { writeTiers(w, rep) })
		},
	}
	c.Flags().StringVar(&fleetPath, "fleet", "", "fleet file whose engines are the endpoints")
	c.Flags().StringVar(&request, "request", "", "DecisionRequest revision (default: the newest accepted for the fleet's model)")
	c.Flags().StringVar(&plan, "plan", "", "prediction record naming artifact and hardware class (for engines not yet booted)")
	return c
}

// judging is what a judgement reads: the fleet's engines, the store's
// records, the release index in force and the --as-of time.
func judging(f *evFlags, fleetPath string) (tierd.Input, error) {
	cfg, err := loadFleet(fleetPath)
	if err != nil {
		return tierd.Input{}, err
	}
	rs, err := f.records()
	if err != nil {
		return tierd.Input{}, err
	}
	ix, err := f.releases()
	if err != nil {
		return tierd.Input{}, err
	}
	advs, err := f.open().Advisories()
	if err != nil {
		return tierd.Input{}, cli.Failed(err)
	}
	asOf, _ := f.time()
	return tierd.Input{Store: f.open(), Records: rs, Engines: iids(cfg), Model: cfg.Model, AsOf: asOf, Releases: ix, Advisories: advs}, nil
}

func writeTiers(w io.Writer, rep tierd.Report) {
	req := "none accepted"
	if rep.Request != nil {
		req = *rep.Request
	}
	fmt.Fprintf(w, "as of %s  release index %s\ndecision request: %s\n", rep.AsOf, short(rep.ReleaseIndex), req)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, e := range rep.Endpoints {
		fmt.Fprintf(w, "\n%s  %s  endpoint %s  vllm %s\n", e.Engine, strings.ToUpper(string(e.Tier)), short(e.Endpoint), e.EngineVersion)
		fmt.Fprintf(w, "  basis: %s\n", joinOr(e.Basis, "none"))
		for _, st := range e.States {
			fmt.Fprintf(w, "  state %s: %s\n", st.State, strings.Join(st.Records, ", "))
		}
		for _, m := range e.MissingText {
			fmt.Fprintf(w, "  missing %s\n", m)
		}
		for _, c := range e.Contested {
			fmt.Fprintf(w, "  CONTESTED %s: %s\n", short(c.Key), strings.Join(c.Records, ", "))
		}
		for _, s := range e.Stale {
			fmt.Fprintf(w, "  stale %s\n", s)
		}
		for _, n := range e.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
}

func evStaleCmd(f *evFlags) *cobra.Command {
	var fleetPath string
	c := &cobra.Command{
		Use:   "stale --fleet F",
		Short: "List the records that expired (or whose freshness is unknown) as of --as-of, and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := judging(f, fleetPath)
			if err != nil {
				return err
			}
			out := tierd.Stale(in.Records, in.Engines, in.AsOf, in.Releases, in.Advisories)
			return f.emit(cmd, "stale", map[string]any{"as_of": in.AsOf, "expired": out}, func(w io.Writer) {
				for _, e := range out {
					fmt.Fprintf(w, "%s  %-14s %-7s %-26s %s\n", e.Record, e.Kind, e.State, e.Clock, e.Reason)
				}
			})
		},
	}
	c.Flags().StringVar(&fleetPath, "fleet", "", "fleet file (engine minor freshness is judged against each engine's current boot)")
	return c
}

func evReleasesCmd(f *evFlags) *cobra.Command {
	c := &cobra.Command{Use: "releases", Short: "The vLLM release index freshness is judged against"}
	c.AddCommand(&cobra.Command{
		Use:   "import FILE",
		Short: "Replace the store's vLLM release index (narwhal.vllm-releases v1 or v2: versions, release dates and, in v2, how each date was established)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readInput(args[0])
			if err != nil {
				return err
			}
			ix, err := vllmrel.Parse(raw)
			if err != nil {
				return cli.Invalid(fmt.Errorf("%s: %w", args[0], err))
			}
			b, d, err := ix.Canonical()
			if err != nil {
				return cli.Invalid(err)
			}
			if err := f.open().WriteReleaseIndex(b); err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "releases import", map[string]any{"release_index": d, "releases": len(ix.Releases)}, func(w io.Writer) {
				fmt.Fprintf(w, "imported %d vLLM releases (index %s)\n", len(ix.Releases), d)
			})
		},
	}, &cobra.Command{
		Use:   "show",
		Short: "Print the release index in force (imported, else shipped)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ix, err := f.releases()
			if err != nil {
				return err
			}
			return f.emit(cmd, "releases show", ix, func(w io.Writer) {
				for _, r := range ix.Releases {
					fmt.Fprintf(w, "%-10s %s\n", r.Version, r.Date)
				}
			})
		},
	})
	return c
}
