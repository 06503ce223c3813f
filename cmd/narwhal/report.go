package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/report"
)

// reportOptions are narwhal report's flags.
type reportOptions struct {
	format, plotDir, html, fleet string
	o                            report.Options
}

func newReportCmd() *cobra.Command {
	var o reportOptions
	cmd := &cobra.Command{
		Use:   "report JOURNAL|BENCH...",
		Short: "Score router journals and bench results: attainment, goodput, refusals, latency, re-roles, KV handoffs",
		Long: `Score each input and print them side by side: a router journal (a path
names a rotated set, <path>.1, <path>.2, … then <path>, read as one) or a
narwhal bench results file. SLO attainment per request and per window,
goodput (the highest swept rate at the target attainment), refusals by
cause, TTFT/TPOT/e2e percentiles against the SLO, re-roles, thrash per hour,
time to adapt after a load shift, KV handoff percentiles, per-engine load
and roles. A journal given with a bench file is joined to it by request id
(client_rid), so every offered request is accounted for on both sides and
the journal is scored per offered rate too. --plot writes PNG and SVG
charts, --html one self-contained page with the charts and tables.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReport(cmd, o, args) },
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "text or json")
	f.StringVar(&o.plotDir, "plot", "", "write the charts as PNG and SVG into this directory")
	f.StringVar(&o.html, "html", "", "write one self-contained HTML page with the charts and tables")
	f.StringVar(&o.fleet, "fleet", "", "take the SLO from this fleet file")
	f.Float64Var(&o.o.SLO.TTFT, "ttft-slo", 0, "TTFT target in seconds (default: the bench's router, or --fleet)")
	f.Float64Var(&o.o.SLO.TPOT, "tpot-slo", 0, "TPOT target in seconds")
	f.Float64Var(&o.o.Target, "target", 0.9, "attainment a rate must reach to count as sustained")
	f.Float64Var(&o.o.WindowS, "window-s", 0, "window length for attainment over time, seconds (0: about a thirtieth of the run, 1 to 60 s)")
	f.IntVar(&o.o.Phases, "phases", 3, "equal phases of a journal without a bench, for time to adapt")
	return cmd
}

func runReport(cmd *cobra.Command, o reportOptions, paths []string) error {
	if o.format != "text" && o.format != "json" {
		return cli.Usage("--format %q: use text or json", o.format)
	}
	if o.fleet != "" && o.o.SLO.TTFT <= 0 {
		cfg, err := fleet.Load(o.fleet)
		if err != nil {
			return cli.Invalid(err)
		}
		o.o.SLO = cfg.SLO
	}
	runs, err := report.Load(paths, o.o)
	if err != nil {
		return cli.Invalid(err)
	}
	if err := writeReport(cmd, o.format, runs); err != nil {
		return err
	}
	return writeCharts(cmd, o.plotDir, o.html, runs)
}

func writeReport(cmd *cobra.Command, format string, runs []*report.Run) error {
	if format == "json" {
		b, err := report.JSON(runs)
		if err != nil {
			return cli.Failed(err)
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	return report.WriteText(cmd.OutOrStdout(), runs)
}

// writeCharts writes --plot's files and --html's page, and says where.
func writeCharts(cmd *cobra.Command, plotDir, html string, runs []*report.Run) error {
	if plotDir != "" {
		files, err := report.Plot(plotDir, runs)
		if err != nil {
			return cli.Failed(err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d chart files to %s\n", len(files), plotDir)
	}
	if html != "" {
		page, err := report.HTML(runs)
		if err != nil {
			return cli.Failed(err)
		}
		if err := atomicfile.Write(html, page, 0o644); err != nil {
			return cli.Failed(fmt.Errorf("--html: %w; check that the directory exists and is writable", err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", html)
	}
	return nil
}
