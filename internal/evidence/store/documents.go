package store

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Stored is a record with its digest.
type Stored struct {
	Digest string
	Record evidence.Record
	// SignedBy is, for an acceptance, the principal whose registered key
	// signed it: the one it names, or "" (SignError says why). Records
	// sets it; Find does not.
	SignedBy, SignError string
}

// documentsDir holds the immutable revisions proposals name (decision
// requests, task suites): canonical bytes under their digest, like records.
const documentsDir = "documents"

// ReleaseIndexFile is where `narwhal evidence releases import` keeps the
// operator's vLLM release index; absent, the shipped one applies.
const ReleaseIndexFile = "vllm-releases.json"

// PutDocument stores canonical document bytes under their digest.
func (s *Store) PutDocument(raw []byte) (string, error) {
	d, err := canon.VerifiedDigest(raw)
	if err != nil {
		return "", fmt.Errorf("refusing document: %w", err)
	}
	_, err = s.write(documentsDir, d, raw)
	return d, err
}

// GetDocument reads a document by digest and re-verifies its bytes.
func (s *Store) GetDocument(digest string) ([]byte, error) { return s.read(documentsDir, digest) }

// ReadReleaseIndex returns the imported release index, or nil when none
// was imported.
func (s *Store) ReadReleaseIndex() ([]byte, error) { return s.readRootFile(ReleaseIndexFile) }

// WriteReleaseIndex replaces the imported release index atomically.
func (s *Store) WriteReleaseIndex(b []byte) error {
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	return atomicfile.Write(filepath.Join(s.Root, ReleaseIndexFile), b, 0o644)
}

// Records loads every stored record, in digest order.
func (s *Store) Records() ([]Stored, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	keys, err := s.PrincipalKeys()
	if err != nil {
		return nil, err
	}
	out := make([]Stored, 0, len(names))
	for _, d := range names {
		r, _, err := s.Get(d)
		if err != nil {
			return nil, err
		}
		st := Stored{Digest: d, Record: r}
		if r.Kind == evidence.KindAcceptance {
			st.SignedBy, st.SignError = signedBy(keys, s.Root, d, r)
		}
		out = append(out, st)
	}
	return out, nil
}
