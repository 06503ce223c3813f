package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
)

// newFleetCmd is the fleet tree: finalisation of engine_contract from the
// live attestation sidecars.
func newFleetCmd() *cobra.Command {
	c := &cobra.Command{Use: "fleet", Short: "Fleet documents built from live engines"}
	c.AddCommand(newFinalizeCmd())
	return c
}

// defaultFinalizedFleet is where finalisation writes without --out, relative
// to the working directory: the seed's router fleet.
const defaultFinalizedFleet = "runs/deployment/fleet.json"

func newFinalizeCmd() *cobra.Command {
	var path, out, backupDir string
	c := &cobra.Command{
		Use:   "finalize --fleet PATH [--out PATH]",
		Short: "Fill engine_contract from every engine's attestation sidecar (complete, identical contracts only)",
		Long: `Read every engine's attestation sidecar, require complete and identical
contracts, and write the fleet with that engine_contract filled in.

The finalised fleet goes to --out, by default ` + defaultFinalizedFleet + `
under the working directory (its directory is created; the write is
atomic). The --fleet file is never modified unless --out names it
explicitly. A file that --out replaces is first backed up to --backup-dir.
A fleet that already declares the live contract is verified and nothing
is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return cli.Usage("--fleet is required: name the fleet file to finalise")
			}
			explicit := cmd.Flags().Changed("out")
			if out == "" {
				return cli.Usage("--out must name a file, e.g. %s", defaultFinalizedFleet)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return finalize(ctx, cmd.OutOrStdout(), path, finalTarget{out, explicit}, backupDir)
		},
	}
	c.Flags().StringVar(&path, "fleet", "", "fleet file whose engines to read; left unchanged unless --out names it")
	c.Flags().StringVar(&out, "out", defaultFinalizedFleet, "where to write the finalised fleet, relative to the working directory")
	c.Flags().StringVar(&backupDir, "backup-dir", "runs", "private directory for the backup of a file --out replaces")
	return c
}

// finalTarget is the output file and whether --out named it.
type finalTarget struct {
	path     string
	explicit bool
}

func finalize(ctx context.Context, w io.Writer, path string, out finalTarget, backupDir string) error {
	src, err := os.Lstat(path)
	if err != nil || !src.Mode().IsRegular() {
		return cli.Invalid(fmt.Errorf("fleet %s must be a regular file, not a symlink or missing", path))
	}
	cfg, err := fleet.Load(path)
	if err != nil {
		return cli.Invalid(err)
	}
	key, err := cfg.Engine.APIKey(os.LookupEnv)
	if err != nil {
		return cli.Invalid(err)
	}
	live, err := liveContract(ctx, cfg, key)
	if err != nil {
		return cli.Failed(err)
	}
	if cfg.EngineContract != nil {
		if d := attest.Diff(live, cfg.EngineContract); len(d) > 0 {
			return cli.Failed(fmt.Errorf("fleet %s already declares an engine_contract that differs from the live sidecars in %s; remove it to re-finalise", path, describeDiff(d)))
		}
		fmt.Fprintf(w, "Router fleet contract verified across live sidecars: %s (%s already declares it; nothing written)\n", live.Fingerprint(), path)
		return nil
	}
	if !out.explicit && sameFile(src, out.path) {
		return cli.Usage("--fleet %s is the default output %s, and finalize never modifies its source implicitly: pass --out %s to replace it in place, or --out another path", path, defaultFinalizedFleet, out.path)
	}
	cfg.EngineContract = live
	backup, err := writeFinalized(cfg, out.path, backupDir)
	if err != nil {
		return cli.Failed(err)
	}
	fmt.Fprintf(w, "Router fleet contract verified across live sidecars: %s\n", live.Fingerprint())
	switch {
	case backup != "":
		fmt.Fprintf(w, "wrote %s (previous file backed up to %s)\n", out.path, backup)
	default:
		fmt.Fprintf(w, "wrote %s; %s left unchanged\n", out.path, path)
	}
	return nil
}

// sameFile reports whether path is the file src describes (through any
// link or spelling); a path that does not exist is not.
func sameFile(src os.FileInfo, path string) bool {
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(src, fi)
}

// liveContract reads every engine's sidecar, verifies each payload against
// its own contract and the live process, and requires complete, identical
// contracts.
func liveContract(ctx context.Context, cfg *fleet.Config, key string) (*fleet.EngineContract, error) {
	var first *fleet.EngineContract
	var firstIID string
	var diffs []string
	probes := probe.New(cfg, probe.Options{APIKey: key})
	defer probes.Close()
	for _, e := range cfg.Engines {
		k, err := engineContract(ctx, probes, e.IID)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first, firstIID = k, e.IID
			continue
		}
		if d := attest.Diff(k, first); len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s differs from %s in %s", e.IID, firstIID, describeDiff(d)))
		}
	}
	if len(diffs) > 0 {
		return nil, fmt.Errorf("engine sidecars report different contracts: %s; relaunch the odd engines from one plan", strings.Join(diffs, "; "))
	}
	if first == nil {
		return nil, errors.New("the fleet declares no engines")
	}
	return first, nil
}

func describeDiff(d []attest.FieldDiff) string {
	parts := make([]string, len(d))
	for i, f := range d {
		parts[i] = fmt.Sprintf("%s (%s vs %s)", f.Field, f.Observed, f.Expected)
	}
	return strings.Join(parts, ", ")
}

// engineContract is iid's attested contract: its payload verified
// against itself and the live process, and complete.
func engineContract(ctx context.Context, probes *probe.Prober, iid string) (*fleet.EngineContract, error) {
	p, err := probes.Attestation(ctx, iid, nil)
	if err != nil {
		return nil, err
	}
	if miss := p.Contract.Missing(); len(miss) > 0 {
		return nil, fmt.Errorf("engine %s attests an incomplete contract, missing %s; capture them into its attestation document", iid, strings.Join(miss, ", "))
	}
	return &p.Contract, nil
}

// writeFinalized renders the finalised document, re-validates it through
// the fleet loader, backs up the file out replaces (if any) and writes out
// atomically. It returns the backup's path, "" when out is new.
func writeFinalized(cfg *fleet.Config, out, backupDir string) (string, error) {
	data, err := cfg.MarshalDocument()
	if err != nil {
		return "", err
	}
	again, err := fleet.Parse(out, data, os.LookupEnv)
	if err != nil {
		return "", fmt.Errorf("finalised fleet does not validate: %w", err)
	}
	if d := attest.Diff(again.EngineContract, cfg.EngineContract); len(d) > 0 {
		return "", fmt.Errorf("finalised fleet reads back a different contract: %s", describeDiff(d))
	}
	var backup string
	switch _, err := os.Stat(out); {
	case err == nil:
		if backup, err = backupFile(out, backupDir); err != nil {
			return "", err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("finalised fleet %s: %w", out, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	if err := atomicfile.Write(out, data, 0o644); err != nil {
		return "", fmt.Errorf("write finalised fleet: %w", err)
	}
	return backup, nil
}

func backupFile(path, dir string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("backup directory %s: %w", dir, err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	dst := filepath.Join(dir, "fleet.before-attestation-"+hex.EncodeToString(id[:])+".json")
	if err := atomicfile.Write(dst, b, 0o600); err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	return dst, nil
}
