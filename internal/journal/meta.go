package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Meta is the body of the meta row written at every open.
type Meta struct {
	Schema          string  `json:"schema"`
	SchemaVersion   int     `json:"schema_version"`
	Package         string  `json:"package"`
	Version         string  `json:"version"`
	Git             *string `json:"git"`
	Source          string  `json:"source"`
	TokenAccounting string  `json:"token_accounting"`
}

func metaOf(o Options) Meta {
	m := Meta{Schema: Schema, SchemaVersion: SchemaVersion, Package: o.Package, Version: o.Version,
		Source: o.Source, TokenAccounting: o.TokenAccounting}
	if o.Git != "" {
		m.Git = Ptr(o.Git)
	}
	return m
}

// ExecutableDigest returns "sha256:<hex>" of the running executable, the
// meta row's source: it tells two builds apart even without version
// control information.
func ExecutableDigest() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("digest of the running executable: %w; set Options.Source", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w; set Options.Source", exe, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("digest of %s: %w; set Options.Source", exe, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
