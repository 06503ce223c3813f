package main

import "github.com/spf13/cobra"

// newEvidenceCmd is filled in by the evidence issue.
func newEvidenceCmd() *cobra.Command {
	return &cobra.Command{Use: "evidence", Short: "Canonical, content-addressed evidence records", Hidden: true}
}
