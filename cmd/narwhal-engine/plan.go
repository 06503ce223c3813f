package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/launch"
)

func newPlanCmd() *cobra.Command {
	var path, out, bindHost string
	var scBase int
	c := &cobra.Command{
		Use:   "plan --fleet PATH [--out runs/engine-launch-<timestamp>/]",
		Short: "Render each engine's vllm serve command, environment and attestation skeleton from the fleet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return cli.Usage("--fleet is required: name the fleet file to plan launches for")
			}
			cfg, err := fleet.Load(path)
			if err != nil {
				return cli.Invalid(err)
			}
			plans, err := launch.Plan(cfg, launch.Options{BindHost: bindHost, SideChannelBase: scBase})
			if err != nil {
				return cli.Invalid(err)
			}
			if out == "" {
				out = filepath.Join("runs", fmt.Sprintf("engine-launch-%s-%d", time.Now().UTC().Format("20060102T150405Z"), os.Getpid()))
			}
			files, err := launch.Write(out, cfg, plans)
			if err != nil {
				return cli.Failed(err)
			}
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			return nil
		},
	}
	c.Flags().StringVar(&path, "fleet", "", "fleet file (narwhal.fleet v1)")
	c.Flags().StringVar(&out, "out", "", "fresh launch directory (default runs/engine-launch-<UTC>-<pid>)")
	c.Flags().StringVar(&bindHost, "bind-host", "0.0.0.0", "vllm serve --host")
	c.Flags().IntVar(&scBase, "side-channel-base", 5600, "engine i's NIXL side-channel port is base+i")
	return c
}
