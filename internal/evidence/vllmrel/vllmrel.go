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

// Schema of the index document.
const (
	Schema        = "narwhal.vllm-releases"
	SchemaVersion = 1
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
	Date    string `json:"date"` // YYYY-MM-DD
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
	if ix.Schema != Schema || ix.SchemaVersion != SchemaVersion {
		return ix, fmt.Errorf("release index: schema %q version %d: want %q version %d", ix.Schema, ix.SchemaVersion, Schema, SchemaVersion)
	}
	for i, r := range ix.Releases {
		if _, err := evidence.ParseVersion(r.Version); err != nil {
			return ix, fmt.Errorf("release index: releases[%d]: %w", i, err)
		}
		if _, err := time.Parse(time.DateOnly, r.Date); err != nil {
			return ix, fmt.Errorf("release index: releases[%d] (%s): date %q: want YYYY-MM-DD", i, r.Version, r.Date)
		}
	}
	sort.Slice(ix.Releases, func(i, j int) bool {
		a, _ := evidence.ParseVersion(ix.Releases[i].Version)
		b, _ := evidence.ParseVersion(ix.Releases[j].Version)
		return a.Compare(b) < 0
	})
	return ix, nil
}

// Canonical is the index's canonical bytes and digest (it goes into the
// decision as the freshness snapshot).
func (ix Index) Canonical() ([]byte, string, error) { return canon.MarshalDigest(ix) }

// AsOf lists the releases published on or before t.
func (ix Index) AsOf(t time.Time) []evidence.Version {
	out := []evidence.Version{}
	for _, r := range ix.Releases {
		d, _ := time.Parse(time.DateOnly, r.Date)
		if !d.After(t) {
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
