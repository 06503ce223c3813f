package state_test

import (
	"path/filepath"
	"testing"

	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

func TestFileStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) func() state.LeaseStore {
		path := filepath.Join(t.TempDir(), "lease.json")
		return func() state.LeaseStore { return state.FileStore(path) }
	})
}
