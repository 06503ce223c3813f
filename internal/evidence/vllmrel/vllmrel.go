// Package vllmrel is the vLLM release index freshness is judged against:
// versions and release dates as data. A copy ships with narwhal; an
// operator replaces it with `narwhal evidence releases import FILE`.
// Evaluated "as of" a time, releases dated after it do not exist yet, so
// the same index and the same --as-of always give the same decisions.
package vllmrel

import (
	_ "embed"
	"fmt"
	"sort"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// Schema of the index document. Version 2 adds a release's date_basis
// (how its date was established) and allows an unknown date; version 1
// documents (every date given, no basis) are still read.
const (
	Schema        = "narwhal.vllm-releases"
	SchemaVersion = 2
)

//go:embed releases.json
var shipped []byte

// Index is a release index.
type Index struct {
	Schema        string    `json:"schema"`
	SchemaVersion int       `json:"schema_version"`
	Source        string    `json:"source"`
	Releases      []Release `json:"releases"`
}

// Release is one vLLM release and the day it was published (UTC).
type Release struct {
	Version string `json:"version"`
	// Date is YYYY-MM-DD, or "" (v2 only) when it could not be
	// established; DateBasis then says why.
	Date string `json:"date"`
	// DateBasis says how the date was established (v2; "" in v1).
	DateBasis string `json:"date_basis"`
}

// Shipped returns the index built into narwhal.
func Shipped() Index {
	ix, err := Parse(shipped)
	if err != nil {
		panic("vllmrel: shipped index: " + err.Error()) // a build defect, caught by the tests
	}
	return ix
}

// Parse decodes and validates an index strictly, releases sorted by
// version so that its canonical form (and digest) is stable.
func Parse(raw []byte) (Index, error) {
	var ix Index
	if err := store.StrictDecode(raw, &ix); err != nil {
		return ix, fmt.Errorf("release index: %w", err)
	}
	if ix.Schema != Schema || ix.SchemaVersion < 1 || ix.SchemaVersion > SchemaVersion {
		return ix, fmt.Errorf("release index: schema %q version %d: want %q version 1 or %d; re-export it in that form", ix.Schema, ix.SchemaVersion, Schema, SchemaVersion)
	}
	for i, r := range ix.Releases {
		if err := checkRelease(r, ix.SchemaVersion); err != nil {
			return ix, fmt.Errorf("release index: releases[%d]: %w", i, err)
		}
	}
	sort.Slice(ix.Releases, func(i, j int) bool {
		a, _ := evidence.ParseVersion(ix.Releases[i].Version)
		b, _ := evidence.ParseVersion(ix.Releases[j].Version)
		return a.Compare(b) < 0
	})
	return ix, nil
}

// checkRelease validates one release against the rules of its schema
// version: v1 needs a date and no basis; v2 needs a basis, and a date
// unless the basis says it is unknown.
func checkRelease(r Release, version int) error {
	if _, err := evidence.ParseVersion(r.Version); err != nil {
		return err
	}
	switch {
	case version == 1 && r.DateBasis != "":
		return fmt.Errorf("%s: date_basis needs schema_version 2", r.Version)
	case version >= 2 && r.DateBasis == "":
		return fmt.Errorf("%s: date_basis is empty; say how the date was established (or why it is unknown)", r.Version)
	case r.Date == "" && version >= 2:
		return nil
	}
	if _, err := time.Parse(time.DateOnly, r.Date); err != nil {
		return fmt.Errorf("%s: date %q: want YYYY-MM-DD", r.Version, r.Date)
	}
	return nil
}

// Undated lists the releases whose date is unknown; AsOf never includes
// them (nothing shows they existed by any given time).
func (ix Index) Undated() []evidence.Version {
	out := []evidence.Version{}
	for _, r := range ix.Releases {
		if r.Date == "" {
			v, _ := evidence.ParseVersion(r.Version)
			out = append(out, v)
		}
	}
	return out
}

// Canonical is the index's canonical bytes and digest (it goes into the
// decision as the freshness snapshot).
func (ix Index) Canonical() ([]byte, string, error) { return canon.MarshalDigest(ix) }

// AsOf lists the releases published on or before t (undated releases
// are left out).
func (ix Index) AsOf(t time.Time) []evidence.Version {
	out := []evidence.Version{}
	for _, r := range ix.Releases {
		d, err := time.Parse(time.DateOnly, r.Date)
		if err == nil && !d.After(t) {
			v, _ := evidence.ParseVersion(r.Version)
			out = append(out, v)
		}
	}
	return out
}

// Load returns the imported index when raw is not nil, else the shipped one.
func Load(raw []byte) (Index, error) {
	if raw == nil {
		return Shipped(), nil
	}
	return Parse(raw)
}
