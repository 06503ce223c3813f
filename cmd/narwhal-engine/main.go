// Command narwhal-engine runs engine tooling: `sim` serves one simulated
// vLLM engine, `sim-fleet` serves several. More subcommands (plan) attach
// to the same root.
package main

import (
	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
)

func main() { cli.Main(newRoot()) }

func newRoot() *cobra.Command {
	root := cli.NewRoot("narwhal-engine", "Engine tooling: simulated vLLM engines for tests, demos and make run")
	root.AddCommand(newSimCmd(), newSimFleetCmd(), newPlanCmd())
	return root
}
