package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"
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
	// Started is the run's start, wall-clock UTC (RFC 3339, nanoseconds):
	// the zero of the run's monotonic times, so arrived + Started places
	// a row in time. Every file of a rotated run repeats it.
	Started string `json:"started,omitempty"`
	// Part numbers the files of one run from 1; a file past the first
	// began when the writer rotated (Options.MaxBytes).
	Part int `json:"part,omitempty"`
}

// StartTime parses Started; ok is false for a journal written before it
// existed.
func (m Meta) StartTime() (t time.Time, ok bool) {
	t, err := time.Parse(time.RFC3339Nano, m.Started)
	return t, err == nil
}

func metaOf(o Options, started time.Time) Meta {
	m := Meta{Schema: Schema, SchemaVersion: SchemaVersion, Package: o.Package, Version: o.Version,
		Source: o.Source, TokenAccounting: o.TokenAccounting, Started: started.UTC().Format(time.RFC3339Nano), Part: 1}
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
