package support

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// FromStore reads every support observation in a store (the adapter
// between the file store and Derive).
func FromStore(st *store.Store) ([]Observation, error) {
	ds, err := st.List()
	if err != nil {
		return nil, err
	}
	recs := make([]evidence.Record, 0, len(ds))
	for _, d := range ds {
		r, _, err := st.Get(d)
		if err != nil {
			return nil, fmt.Errorf("support: %w", err)
		}
		recs = append(recs, r)
	}
	return Observations(recs, ds), nil
}

// Lookup derives the state of k from the pinned registry and the store;
// ok is false when no registry covers k's engine version.
func Lookup(st *store.Store, k Key) (Entry, bool, error) {
	reg, ok, err := LoadRegistry(k.EngineVersion)
	if err != nil || !ok {
		return Entry{}, ok, err
	}
	obs, err := FromStore(st)
	if err != nil {
		return Entry{}, false, err
	}
	return Derive(k, reg, obs), true, nil
}
