package state_test

import (
	"path/filepath"
	"testing"

	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

// The file lease passes the suite every backend passes: two routers,
// self-fencing, takeover, release, racing claims (the two-router sequence
// that lease_test.go held before it became the suite).
func TestFileStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) func() state.LeaseStore {
		path := filepath.Join(t.TempDir(), "lease.json")
		return func() state.LeaseStore { return state.FileStore(path) }
	})
}
