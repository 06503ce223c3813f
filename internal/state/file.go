package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

// Write validates h and replaces path with it atomically (temporary file
// in the same directory, fsync, rename, fsync of the directory), creating
// the parent directory if needed. Readers, concurrent writers included,
// see the previous complete document or the new one, never a mix; a
// failed write leaves the previous one.
func Write(path string, h *Handoff) error {
	b, err := Encode(h)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write handoff %s: create its directory: %w", path, err)
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

// Read loads the handoff document at path. A missing file returns an
// error for which errors.Is(err, fs.ErrNotExist) holds: a normal cold
// start. Any other failure (a torn or hand-edited file, a newer build's
// document) is a *ReadError that the router must treat as fatal: it names
// the file and tells the operator to move it aside to cold-start.
func Read(path string) (*Handoff, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("handoff %s does not exist (cold start): %w", path, err)
	}
	if err != nil {
		return nil, &ReadError{Path: path, Err: err}
	}
	h, err := Decode(b)
	if err != nil {
		return nil, &ReadError{Path: path, Err: withFile(err, path)}
	}
	return h, nil
}

// ReadError is a state file that exists but cannot be used. Unwrap gives
// the *Problem, *VersionError or I/O error underneath.
type ReadError struct {
	Path string
	Err  error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("%v; to cold-start, move the file aside (mv %s %s.bad) and start again", e.Err, e.Path, e.Path)
}

func (e *ReadError) Unwrap() error { return e.Err }
