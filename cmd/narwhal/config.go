package main

import "github.com/spf13/cobra"

func newConfigCmd() *cobra.Command {
	return &cobra.Command{Use: "config", Short: "Validate and inspect fleet files"}
}
