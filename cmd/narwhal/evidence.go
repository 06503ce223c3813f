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
	c := &cobra.Command{Use: "evidence", Short: "Canonical, content-addressed evidence records"}
	var storeDir string
	c.PersistentFlags().StringVar(&storeDir, "store", "evidence", "evidence store directory")
	for _, sub := range []struct {
		use, short string
		args       cobra.PositionalArgs
		run        func(cmd *cobra.Command, args []string, store string) error
	}{
		{"canon FILE", "Print the RFC 8785 canonical form of a JSON file (no trailing newline)", cobra.ExactArgs(1), evCanon},
		{"digest FILE", "Print the 1220… digest of a JSON file's canonical form", cobra.ExactArgs(1), evDigest},
		{"verify DIR|FILE", "Re-check canonical form and digests of a store directory or one file", cobra.ExactArgs(1), evVerify},
		{"add FILE", "Add a canonical record to the store and print its digest", cobra.ExactArgs(1), evAdd},
		{"show DIGEST", "Print a stored record's canonical bytes after re-verifying them", cobra.ExactArgs(1), evShow},
		{"ls", "List stored records: digest, kind, level, claim", cobra.NoArgs, evLs},
		{"release NAME", "Write a narwhal.evidence-release manifest over every stored record and print its digest", cobra.ExactArgs(1), evRelease},
	} {
		run := sub.run
		c.AddCommand(&cobra.Command{Use: sub.use, Short: sub.short, Args: sub.args,
			RunE: func(cmd *cobra.Command, args []string) error { return run(cmd, args, storeDir) }})
	}
	c.AddCommand(evSignCmds()...)
	c.AddCommand(evSupportCmd(&storeDir), evQueueCmd(&storeDir))
	return c
}

func evCanon(cmd *cobra.Command, args []string, _ string) error {
	b, err := canonicalFile(args[0])
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(b)
	return err
}

func evDigest(cmd *cobra.Command, args []string, _ string) error {
	b, err := canonicalFile(args[0])
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), canon.Digest(b))
	return err
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

func evVerify(cmd *cobra.Command, args []string, _ string) error {
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
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "verified %d files: canonical, digests match\n", n)
	return err
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

func evAdd(cmd *cobra.Command, args []string, dir string) error {
	raw, err := readInput(args[0])
	if err != nil {
		return err
	}
	d, err := store.Open(dir).Put(raw)
	if err != nil {
		return cli.Invalid(fmt.Errorf("%s: %w", args[0], err))
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), d)
	return err
}

func evShow(cmd *cobra.Command, args []string, dir string) error {
	if !canon.IsDigest(args[0]) {
		_, err := canon.ParseDigest(args[0])
		return cli.Invalid(err)
	}
	_, b, err := store.Open(dir).Get(args[0])
	if err != nil {
		return cli.Failed(err)
	}
	_, err = cmd.OutOrStdout().Write(append(b, '\n'))
	return err
}

func evLs(cmd *cobra.Command, args []string, dir string) error {
	s := store.Open(dir)
	ds, err := s.List()
	if err != nil {
		return cli.Failed(err)
	}
	for _, d := range ds {
		r, _, err := s.Get(d)
		if err != nil {
			return cli.Failed(err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s  %-13s %-24s %s\n", d, r.Kind, r.Level, claimText(r.Claim))
	}
	return nil
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

func evRelease(cmd *cobra.Command, args []string, dir string) error {
	d, err := store.Open(dir).WriteRelease(args[0], nil)
	if err != nil {
		return cli.Failed(err)
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), d)
	return err
}
