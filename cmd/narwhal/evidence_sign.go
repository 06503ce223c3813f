package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
)

// evSignCmds are the signing subcommands (docs/evidence.md "Signing").
func evSignCmds() []*cobra.Command {
	return []*cobra.Command{evKeygenCmd(), evSignCmd(), evVerifySignatureCmd(), evStatementCmd(), evVerifyBundleCmd()}
}

func evKeygenCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "keygen --out PREFIX",
		Short: "Write an Ed25519 key pair: PREFIX (private, mode 0600) and PREFIX.pub",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return cli.Usage("keygen: --out PREFIX is required")
			}
			k, err := sign.GenerateKey(rand.Reader)
			if err != nil {
				return cli.Failed(err)
			}
			// O_EXCL: never overwrite a key someone may already rely on.
			if err := writeNew(out, k.PEM(), 0o600); err != nil {
				return err
			}
			if err := writeNew(out+".pub", k.Public.PEM(), 0o644); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (private, 0600) and %s.pub; key id %s\n", out, out, k.Public.ID())
			return err
		},
	}
	c.Flags().StringVar(&out, "out", "", "path prefix of the key files")
	return c
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return cli.Invalid(fmt.Errorf("%w; pick another --out or remove the old key", err))
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cli.Failed(fmt.Errorf("write %s: %w", path, err))
	}
	return nil
}

func evSignCmd() *cobra.Command {
	var keyPath string
	c := &cobra.Command{
		Use:   "sign --key PREFIX RECORD",
		Short: "Print a DSSE envelope (in-toto Statement over the canonical record or release manifest) signed with PREFIX",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := readParsed(keyPath, sign.ParsePrivateKey)
			if err != nil {
				return err
			}
			payload, err := statementPayload(args[0])
			if err != nil {
				return err
			}
			return writeJSON(cmd, sign.SignPayload(k, sign.PayloadType, payload))
		},
	}
	c.Flags().StringVar(&keyPath, "key", "", "private key file written by keygen")
	_ = c.MarkFlagRequired("key")
	return c
}

// readParsed reads path and parses it; either failure is bad input
// naming the file.
func readParsed[T any](path string, parse func([]byte) (T, error)) (T, error) {
	raw, err := readInput(path)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(raw)
	if err != nil {
		return v, cli.Invalid(fmt.Errorf("%s: %w", path, err))
	}
	return v, nil
}

// statementPayload canonicalizes a record or manifest file and returns its
// Statement's canonical bytes.
func statementPayload(path string) ([]byte, error) {
	b, err := canonicalFile(path)
	if err != nil {
		return nil, err
	}
	st, err := sign.StatementFor(b)
	if err == nil {
		var p []byte
		if p, err = st.Encode(); err == nil {
			return p, nil
		}
	}
	return nil, cli.Invalid(fmt.Errorf("%s: %w", path, err))
}

func writeJSON(cmd *cobra.Command, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return cli.Failed(err)
	}
	_, err = cmd.OutOrStdout().Write(append(b, '\n'))
	return err
}

func evStatementCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "statement FILE",
		Short: "Print the in-toto Statement v1 view of a record or release manifest (canonical JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := statementPayload(args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(append(p, '\n'))
			return err
		},
	}
}

// refusalExit maps a verification refusal to exit 1 and anything else
// (unreadable or malformed input) to exit 2.
func refusalExit(what string, err error) error {
	var r *sign.Refusal
	if errors.As(err, &r) {
		return cli.Failed(fmt.Errorf("%s: %w", what, err))
	}
	return cli.Invalid(fmt.Errorf("%s: %w", what, err))
}
