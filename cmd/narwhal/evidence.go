package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// newEvidenceCmd is the evidence tree: canonical form, digests and the
// content-addressed record store (docs/evidence.md).
func newEvidenceCmd() *cobra.Command {
	c := &cobra.Command{Use: "evidence", Short: "Canonical, content-addressed evidence records, acceptance and tiers"}
	f := &evFlags{}
	f.bind(c)
	c.PersistentPreRunE = func(*cobra.Command, []string) error { return f.check() }
	c.AddCommand(
		evCanonCmd(f), evDigestCmd(f), evVerifyCmd(f),
		evAddCmd(f), evShowCmd(f), evLsCmd(f), evReleaseCmd(f),
		evProposeCmd(f), evAcceptCmd(f), evKeysCmd(f), evAdvisoriesCmd(f), evCandidatesCmd(f), evFromJournalCmd(f), evTaskRunCmd(f),
		evTierCmd(f), evStaleCmd(f), evReleasesCmd(f),
	)
	c.AddCommand(evSignCmds()...)
	c.AddCommand(evSupportCmd(&f.store), evQueueCmd(&f.store))
	return c
}

func evCanonCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "canon FILE",
		Short: "Print the RFC 8785 canonical form of a JSON file (no trailing newline)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := canonicalFile(args[0])
			if err != nil {
				return err
			}
			return f.emit(cmd, "canon", map[string]any{"canonical": string(b), "digest": canon.Digest(b)}, func(w io.Writer) { w.Write(b) })
		},
	}
}

func evDigestCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "digest FILE",
		Short: "Print the 1220… digest of a JSON file's canonical form",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := canonicalFile(args[0])
			if err != nil {
				return err
			}
			d := canon.Digest(b)
			return f.emit(cmd, "digest", map[string]any{"digest": d}, func(w io.Writer) { fmt.Fprintln(w, d) })
		},
	}
}

// canonicalFile reads and canonicalizes path ("-" is stdin); anything that
// cannot be canonicalized is bad input (exit 2).
func canonicalFile(path string) ([]byte, error) {
	raw, err := readInput(path)
	if err != nil {
		return nil, err
	}
	b, err := canon.Canonicalize(raw)
	if err != nil {
		return nil, cli.Invalid(fmt.Errorf("%s: %w", path, err))
	}
	return b, nil
}

func readInput(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, cli.Invalid(fmt.Errorf("read %s: %w", path, err))
	}
	return b, nil
}

func evVerifyCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR|FILE",
		Short: "Re-check canonical form and digests of a store directory or one file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fi, err := os.Stat(args[0])
			if err != nil {
				return cli.Invalid(err)
			}
			n, probs := 1, verifyFile(args[0])
			if fi.IsDir() {
				n, probs = store.Open(args[0]).Verify()
			}
			for _, p := range probs {
				fmt.Fprintln(cmd.ErrOrStderr(), cmd.CommandPath()+": "+p.String())
			}
			if len(probs) > 0 {
				return cli.Silent(cli.ExitFailed)
			}
			return f.emit(cmd, "verify", map[string]any{"files": n}, func(w io.Writer) {
				fmt.Fprintf(w, "verified %d files: canonical, digests match\n", n)
			})
		},
	}
}

// verifyFile checks one file is canonical and, when named <digest>.json,
// hashes to its name.
func verifyFile(path string) []store.Problem {
	b, err := os.ReadFile(path)
	if err == nil {
		var d string
		d, err = canon.VerifiedDigest(b)
		if name := strings.TrimSuffix(filepath.Base(path), ".json"); err == nil && canon.IsDigest(name) && name != d {
			err = fmt.Errorf("bytes hash to %s, not to the file name", d)
		}
	}
	if err != nil {
		return []store.Problem{{Path: path, Err: err}}
	}
	return nil
}

func evAddCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "add FILE",
		Short: "Add a canonical record to the store and print its digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readInput(args[0])
			if err != nil {
				return err
			}
			d, err := f.open().Put(raw)
			if err != nil {
				return cli.Invalid(fmt.Errorf("%s: %w", args[0], err))
			}
			return f.emit(cmd, "add", map[string]any{"record": d}, func(w io.Writer) { fmt.Fprintln(w, d) })
		},
	}
}

func claimText(c evidence.Claim) string {
	s := c.Quantity
	if c.Verdict != nil {
		s += "=" + *c.Verdict
	}
	if c.Value != nil {
		s += "=" + strconv.FormatFloat(*c.Value, 'g', -1, 64) + c.Unit
	}
	return s
}

func evReleaseCmd(f *evFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "release NAME",
		Short: "Write a narwhal.evidence-release manifest over every stored record and print its digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := f.open().WriteRelease(args[0], nil)
			if err != nil {
				return cli.Failed(err)
			}
			return f.emit(cmd, "release", map[string]any{"release": d}, func(w io.Writer) { fmt.Fprintln(w, d) })
		},
	}
}
