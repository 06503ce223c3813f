package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/sign"
)

func evVerifySignatureCmd() *cobra.Command {
	var keyPath string
	c := &cobra.Command{
		Use:   "verify-signature --key PREFIX.pub ENVELOPE [RECORD]",
		Short: "Verify a DSSE envelope with a public key (and that RECORD is what it signs): exit 0 valid, 1 invalid, 2 bad input",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, env, payload, err := loadEnvelope(keyPath, args[0])
			if err != nil {
				return err
			}
			st, err := sign.Verify(env, payload, pub)
			if err != nil {
				return refusalExit(args[0], err)
			}
			if len(args) == 2 {
				b, err := canonicalFile(args[1])
				if err != nil {
					return err
				}
				if err := sign.CheckCovers(st, canon.Digest(b)); err != nil {
					return refusalExit(args[1], err)
				}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "valid: %s signed by key %s; subjects %s\n", st.PredicateType, pub.ID(), strings.Join(st.SubjectDigests(), " "))
			return err
		},
	}
	c.Flags().StringVar(&keyPath, "key", "", "public key file (PREFIX.pub) written by keygen")
	_ = c.MarkFlagRequired("key")
	return c
}

// parsedEnvelope is an envelope with its decoded payload.
type parsedEnvelope struct {
	env     sign.Envelope
	payload []byte
}

func parseEnvelopeFile(b []byte) (parsedEnvelope, error) {
	e, p, err := sign.ParseEnvelope(b)
	return parsedEnvelope{e, p}, err
}

func loadEnvelope(keyPath, envPath string) (sign.PublicKey, sign.Envelope, []byte, error) {
	pub, err := readParsed(keyPath, sign.ParsePublicKey)
	if err != nil {
		return sign.PublicKey{}, sign.Envelope{}, nil, err
	}
	pe, err := readParsed(envPath, parseEnvelopeFile)
	return pub, pe.env, pe.payload, err
}
