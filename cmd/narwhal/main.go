// Command narwhal is the umbrella CLI: fleet configuration, evidence
// records, and (as they land) the local dev fleet, the demo, reports,
// memory planning and diagnosis.
package main

import (
	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
)

func main() { cli.Main(newRoot()) }

func newRoot() *cobra.Command {
	root := cli.NewRoot("narwhal", "Operate a disaggregated prefill/decode vLLM fleet")
	root.AddCommand(newConfigCmd(), newEvidenceCmd(), newDevCmd(), newDemoCmd(), newFleetCmd(), newPlanCmd(), newDiagnoseCmd(),
		newBenchCmd(), newReportCmd())
	return root
}
