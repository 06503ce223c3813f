// Package store is the content-addressed evidence store on disk:
//
//	<root>/records/<digest>.json   canonical record bytes, no newline
//	<root>/releases/<digest>.json  canonical release manifests
//	<root>/index/v1/<sha256>.seg   subject index segments (a cache, index.go)
//
// A file's name is the digest of its bytes. Writes are atomic and
// idempotent; reads re-verify canonical form and digest, so a file edited
// by hand is refused rather than trusted.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Store is a store rooted at a directory.
type Store struct{ Root string }

// Open returns the store at root; nothing is created until a write.
func Open(root string) *Store { return &Store{Root: root} }

const (
	recordsDir  = "records"
	releasesDir = "releases"
)

// Put stores raw record bytes from outside. They must already be
// canonical (never repaired: INV-43) and a valid record.
func (s *Store) Put(raw []byte) (string, error) {
	d, err := canon.VerifiedDigest(raw)
	if err != nil {
		return "", fmt.Errorf("refusing record: %w", err)
	}
	r, err := DecodeRecord(raw)
	if err != nil {
		return "", fmt.Errorf("refusing record: %w", err)
	}
	created, err := s.write(recordsDir, d, raw)
	if err != nil || !created {
		return d, err
	}
	// The record is durable; the index is a cache that the next lookup
	// repairs (it re-indexes any record no segment names), so failing to
	// update it must not fail the write.
	_ = s.indexRecord(d, r)
	return d, nil
}

// PutRecord encodes and stores r.
func (s *Store) PutRecord(r evidence.Record) (string, error) {
	b, _, err := evidence.Encode(r)
	if err != nil {
		return "", err
	}
	return s.Put(b)
}

// Get reads a record by digest and re-verifies it.
func (s *Store) Get(digest string) (evidence.Record, []byte, error) {
	b, err := s.read(recordsDir, digest)
	if err != nil {
		return evidence.Record{}, nil, err
	}
	r, err := DecodeRecord(b)
	if err != nil {
		return evidence.Record{}, nil, fmt.Errorf("%s: %w", s.path(recordsDir, digest), err)
	}
	return r, b, nil
}

// List returns the digests of every stored record, sorted.
func (s *Store) List() ([]string, error) { return s.names(recordsDir) }

// WriteRelease writes a manifest over every stored record (or the given
// digests, each of which must be stored) and returns its digest.
func (s *Store) WriteRelease(name string, digests []string) (string, error) {
	if digests == nil {
		all, err := s.List()
		if err != nil {
			return "", err
		}
		digests = all
	}
	for _, d := range digests {
		if _, _, err := s.Get(d); err != nil {
			return "", fmt.Errorf("release %q: %w", name, err)
		}
	}
	rel, err := evidence.NewRelease(name, digests)
	if err != nil {
		return "", err
	}
	b, d, err := rel.Encode()
	if err != nil {
		return "", err
	}
	_, err = s.write(releasesDir, d, b)
	return d, err
}

// GetRelease reads a manifest by digest and re-verifies it.
func (s *Store) GetRelease(digest string) (evidence.Release, error) {
	b, err := s.read(releasesDir, digest)
	if err != nil {
		return evidence.Release{}, err
	}
	var rel evidence.Release
	if err := StrictDecode(b, &rel); err != nil {
		return rel, fmt.Errorf("%s: %w", s.path(releasesDir, digest), err)
	}
	return rel, rel.Validate()
}

// DecodeRecord decodes canonical record bytes strictly: unknown fields and
// unknown newer schema versions fail loudly.
func DecodeRecord(b []byte) (evidence.Record, error) {
	var r evidence.Record
	if err := StrictDecode(b, &r); err != nil {
		return r, err
	}
	return r, r.Validate()
}

// StrictDecode decodes one JSON value into v, refusing unknown fields.
func StrictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

func (s *Store) path(dir, digest string) string {
	return filepath.Join(s.Root, dir, digest+".json")
}

// write stores b under its digest and says whether it created the file.
// An existing file must hold the same bytes (writes are idempotent); a
// different one is corruption and is reported, not overwritten.
func (s *Store) write(dir, digest string, b []byte) (bool, error) {
	p := s.path(dir, digest)
	old, err := os.ReadFile(p)
	switch {
	case err == nil && bytes.Equal(old, b):
		return false, nil
	case err == nil:
		return false, fmt.Errorf("%s exists with different bytes: the store is corrupted; run 'narwhal evidence verify %s'", p, s.Root)
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, fmt.Errorf("evidence store: %w", err)
	}
	return true, atomicfile.Write(p, b, 0o644)
}

// read returns the bytes under digest after checking the name is a digest,
// the bytes are canonical and they hash to the name.
func (s *Store) read(dir, digest string) ([]byte, error) {
	if !canon.IsDigest(digest) {
		return nil, fmt.Errorf("%q is not a 1220… digest", digest)
	}
	p := s.path(dir, digest)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	got, err := canon.VerifiedDigest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if got != digest {
		return nil, fmt.Errorf("%s: bytes hash to %s, not to the file name", p, got)
	}
	return b, nil
}

// names lists dir's <digest>.json files, sorted. It reads names only
// (no per-entry stat): every index lookup lists the records, and on a
// large store that listing is most of a lookup's cost.
func (s *Store) names(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(s.Root, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	defer f.Close()
	ents, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	out := []string{}
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e, ".json"); ok && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}
