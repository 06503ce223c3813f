package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/observe"
)

// newObserveCmd is `narwhal dev observe`, what make observe runs.
func newObserveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "observe",
		Short: "Run Prometheus with the shipped config and alert rules against a router (what make observe does)",
		Long: `Start a real Prometheus (Debian's prometheus package) with
deploy/observability/prometheus.yml and prometheus-alerts.yml, scraping the
router at $NARWHAL_ROUTER_URL (default ` + observe.DefaultRouterURL + `, make run's) as job
narwhal-router and the engines of $NARWHAL_FLEET (default ` + observe.DefaultFleet + `) as
job engines, listening on $NARWHAL_PROMETHEUS_LISTEN_ADDRESS (default
` + observe.DefaultListen + `). What Prometheus reads is staged under ` + observe.DefaultDir + `/.
Run it from the repository root. Ctrl-C stops Prometheus.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := cli.UntilSignal(cmd.Context())
			defer stop()
			if err := observe.Run(ctx, observe.FromEnv(os.LookupEnv), cmd.OutOrStdout()); err != nil {
				return cli.Failed(err)
			}
			return nil
		},
	}
}
