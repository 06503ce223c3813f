package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/devfleet"
)

func newDevCmd() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Local development fleets"}
	var o devfleet.Options
	run := &cobra.Command{
		Use:   "run",
		Short: "Run simulated vLLM engines and the router on loopback (what make run does)",
		Long: `Start simulated vLLM engines (half prefill, half decode), write their fleet
file and profile store under --dir, and serve the real router in front of
them on 127.0.0.1. Any OpenAI client can use the printed base URL.
Lifecycle actions (POST /narwhal/lifecycle/drain, /readmit) need an admin
token: a random one is drawn for each run and printed in the banner, or
--admin-token-env NAME uses the value of $NAME (as narwhal-serve does).
Ctrl-C drains the router and stops the engines.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := cli.AdminToken(o.AdminTokenEnv)
			if err != nil {
				return err
			}
			o.AdminToken = token
			ctx, stop := cli.UntilSignal(cmd.Context())
			defer stop()
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if err := devfleet.Run(ctx, o, cmd.OutOrStdout()); err != nil {
				return cli.Failed(err)
			}
			return nil
		},
	}
	f := run.Flags()
	f.StringVar(&o.Dir, "dir", "runs/dev", "directory for the generated fleet file, profiles and journal")
	f.StringVar(&o.Host, "host", "127.0.0.1", "router bind address")
	f.IntVar(&o.Port, "port", 8000, "router port")
	f.IntVar(&o.Engines, "engines", 4, "number of simulated engines")
	f.StringVar(&o.Model, "model", "narwhal/sim-llama-3-8b", "model name the fleet serves")
	f.StringVar(&o.AdminTokenEnv, "admin-token-env", "", "name of the environment variable holding the bearer token for POST /narwhal/lifecycle/* (default: a random token, printed at start)")
	dev.AddCommand(run, newObserveCmd())
	return dev
}
