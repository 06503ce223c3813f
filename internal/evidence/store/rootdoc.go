package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

// The store's root holds a few small operator documents beside the
// content-addressed records (the release index, the advisory index, the
// principal-key registry). They share one way to be read and one way to
// be changed, so two operators importing at once keep both changes.

// readRootFile returns the bytes of the root document name, or nil when
// the store has none.
func (s *Store) readRootFile(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(s.Root, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	return b, nil
}

// updateRootDoc runs change under the document's lock and writes the
// value it returns as indented JSON; a nil value leaves the file as it is.
func (s *Store) updateRootDoc(name string, change func() (any, error)) error {
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	unlock, err := atomicfile.Lock(filepath.Join(s.Root, name+".lock"))
	if err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	defer unlock()
	v, err := change()
	if err != nil || v == nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(s.Root, name), append(b, '\n'), 0o644)
}
