package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// The advisory index: the security advisories the operator imported
// (`narwhal evidence advisories import`), which security freshness is
// judged against. A store that never imported one has none, and security
// freshness is then unknown rather than fresh.
const (
	AdvisoriesFile          = "advisories.json"
	AdvisoriesSchema        = "narwhal.advisory-index"
	AdvisoriesSchemaVersion = 1
)

// AdvisoryIndex is the imported advisories, by id, and where they came from.
type AdvisoryIndex struct {
	Schema        string              `json:"schema"`
	SchemaVersion int                 `json:"schema_version"`
	Advisories    []evidence.Advisory `json:"advisories"` // sorted by id
	Sources       []AdvisorySource    `json:"sources"`
}

// AdvisorySource is one imported file: its sha256 and how many it held.
type AdvisorySource struct {
	Digest string `json:"sha256"`
	Count  int    `json:"advisories"`
}

// Advisories is the imported index's advisories; nil when none was ever
// imported (freshness: "no advisory index supplied").
func (s *Store) Advisories() ([]evidence.Advisory, error) {
	ix, ok, err := s.advisoryIndex()
	if err != nil || !ok {
		return nil, err
	}
	return ix.Advisories, nil
}

func (s *Store) advisoryIndex() (AdvisoryIndex, bool, error) {
	ix := AdvisoryIndex{Schema: AdvisoriesSchema, SchemaVersion: AdvisoriesSchemaVersion, Advisories: []evidence.Advisory{}, Sources: []AdvisorySource{}}
	b, err := s.readRootFile(AdvisoriesFile)
	if err != nil || b == nil {
		return ix, false, err
	}
	if err := json.Unmarshal(b, &ix); err != nil || ix.Schema != AdvisoriesSchema || ix.SchemaVersion != AdvisoriesSchemaVersion {
		return ix, false, fmt.Errorf("evidence store %s: not a %s v%d document (%v); remove it and import the advisories again",
			filepath.Join(s.Root, AdvisoriesFile), AdvisoriesSchema, AdvisoriesSchemaVersion, err)
	}
	return ix, true, nil
}

// ImportAdvisories adds advs (from the file whose bytes are raw) to the
// index, an advisory replacing the one with its id; it returns the index's
// size.
func (s *Store) ImportAdvisories(raw []byte, advs []evidence.Advisory) (int, error) {
	size := 0
	err := s.updateRootDoc(AdvisoriesFile, func() (any, error) {
		ix, _, err := s.advisoryIndex()
		if err != nil {
			return nil, err
		}
		byID := map[string]evidence.Advisory{}
		for _, a := range append(ix.Advisories, advs...) {
			byID[a.ID] = a
		}
		ix.Advisories = ix.Advisories[:0]
		for _, a := range byID {
			ix.Advisories = append(ix.Advisories, a)
		}
		sort.Slice(ix.Advisories, func(i, j int) bool { return ix.Advisories[i].ID < ix.Advisories[j].ID })
		sum := sha256.Sum256(raw)
		ix.Sources = append(ix.Sources, AdvisorySource{Digest: hex.EncodeToString(sum[:]), Count: len(advs)})
		size = len(ix.Advisories)
		return ix, nil
	})
	return size, err
}
