package support

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// FromStore reads every support observation in a store (the adapter
// between the file store and Derive). Support records are the ones whose
// claim quantity is QuantitySupport, so the store's index names them and
// no other record is read.
func FromStore(st *store.Store) ([]Observation, error) {
	found, err := st.Find(store.QuantityTerm(QuantitySupport))
	if err != nil {
		return nil, fmt.Errorf("support: %w", err)
	}
	recs := make([]evidence.Record, len(found))
	ds := make([]string, len(found))
	for i, f := range found {
		recs[i], ds[i] = f.Record, f.Digest
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
