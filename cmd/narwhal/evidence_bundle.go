package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/evidence/sigbundle"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// bundleRefusal is the document verify-bundle prints on stdout when it
// refuses (exit 1), so scripts read the reason without parsing stderr.
type bundleRefusal struct {
	Verified bool             `json:"verified"`
	Reason   sigbundle.Reason `json:"reason"`
	Message  string           `json:"message"`
}

func evVerifyBundleCmd() *cobra.Command {
	var rootPath, bundlePath, keyPath string
	var in sigbundle.Input
	c := &cobra.Command{
		Use:   "verify-bundle --trusted-root FILE --bundle FILE [--certificate-identity ID --certificate-oidc-issuer URL | --key FILE] ARTIFACT",
		Short: "Verify a Sigstore bundle offline with sigstore-go and print what it proves: exit 0 verified, 1 refused (with a reason), 2 bad input",
		Long: `Verify a Sigstore bundle (v0.1 to v0.3; keyless or public-key; Rekor v1 or v2)
offline against a pinned trusted_root.json, with sigstore-go. A keyless bundle
needs a verified transparency-log entry (with an inclusion proof from bundle
v0.2 on and for Rekor v2; with a signed entry timestamp in v0.1), a verified
signing time (the log's signed entry timestamp or an RFC 3161 timestamp)
inside its certificate's validity, a chain to a certificate authority of the
root and, when the root names a CT log, an SCT. A public-key bundle (--key)
needs a verified signing time. The wall clock decides nothing.
Refusals name a reason: see docs/evidence.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if in.TrustedRoot, err = readInput(rootPath); err != nil {
				return err
			}
			if in.Bundle, err = readInput(bundlePath); err != nil {
				return err
			}
			if in.Artifact, err = readInput(args[0]); err != nil {
				return err
			}
			if keyPath != "" {
				if in.Key, err = readParsed(keyPath, parsePEMPublicKey); err != nil {
					return err
				}
			}
			in.Now = ports.SystemClock().Now()
			res, err := sigbundle.Verify(in)
			var r *sigbundle.Refusal
			if errors.As(err, &r) {
				if werr := writeJSON(cmd, bundleRefusal{Reason: r.Reason, Message: r.Detail}); werr != nil {
					return werr
				}
				return cli.Failed(fmt.Errorf("%s: %w", bundlePath, err))
			}
			if err != nil {
				return cli.Invalid(fmt.Errorf("%s: %w", bundlePath, err))
			}
			return writeJSON(cmd, res)
		},
	}
	c.Flags().StringVar(&rootPath, "trusted-root", "", "Sigstore trusted_root.json (pinned; no network is used)")
	c.Flags().StringVar(&bundlePath, "bundle", "", "Sigstore bundle (v0.1–v0.3 JSON)")
	c.Flags().StringVar(&in.Identity, "certificate-identity", "", "require this certificate SAN (e-mail or URI), exactly")
	c.Flags().StringVar(&in.Issuer, "certificate-oidc-issuer", "", "require this OIDC issuer, exactly")
	c.Flags().StringVar(&keyPath, "key", "", "PEM public key (PKIX) of a public-key bundle, instead of a certificate identity")
	_ = c.MarkFlagRequired("trusted-root")
	_ = c.MarkFlagRequired("bundle")
	c.MarkFlagsMutuallyExclusive("key", "certificate-identity")
	c.MarkFlagsMutuallyExclusive("key", "certificate-oidc-issuer")
	return c
}

// parsePEMPublicKey reads a PKIX "PUBLIC KEY" PEM (ECDSA, RSA or Ed25519,
// as cosign and openssl write them).
func parsePEMPublicKey(b []byte) (crypto.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New(`not a PEM "PUBLIC KEY" block; pass the signer's public key (for example cosign.pub)`)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return k, nil
}
