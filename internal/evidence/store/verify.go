package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Problem is one file that failed verification.
type Problem struct {
	Path string
	Err  error
}

func (p Problem) String() string { return fmt.Sprintf("%s: %v", p.Path, p.Err) }

// Verify re-checks every record and release: canonical form, digest equal
// to the file name, strict decoding, and that each release's records are
// present. It returns the number of files checked and every problem.
func (s *Store) Verify() (int, []Problem) {
	var probs []Problem
	n := 0
	for _, dir := range []string{recordsDir, releasesDir, documentsDir} {
		names, err := s.allFiles(dir)
		if err != nil {
			return n, append(probs, Problem{filepath.Join(s.Root, dir), err})
		}
		for _, name := range names {
			n++
			if err := s.verifyOne(dir, name); err != nil {
				probs = append(probs, Problem{filepath.Join(s.Root, dir, name), err})
			}
		}
	}
	return n, probs
}

func (s *Store) verifyOne(dir, name string) error {
	digest, ok := strings.CutSuffix(name, ".json")
	if !ok || !canon.IsDigest(digest) {
		return fmt.Errorf("file name is not <digest>.json")
	}
	switch dir {
	case recordsDir:
		_, _, err := s.Get(digest)
		return err
	case documentsDir:
		_, err := s.GetDocument(digest)
		return err
	}
	rel, err := s.GetRelease(digest)
	if err != nil {
		return err
	}
	for _, d := range rel.RecordDigests {
		if _, _, err := s.Get(d); err != nil {
			return fmt.Errorf("release names record %s: %w", d, err)
		}
	}
	return nil
}

func (s *Store) allFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.Root, dir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
