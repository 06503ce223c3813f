package state

import (
	"context"
	"errors"
	"fmt"
)

// LeaseStore is where the shared lease record lives: a file with flock,
// an etcd key, a Kubernetes Lease. A backend only reads and atomically
// replaces the record; what may be written (epochs, holders, expiry) is
// Lease's, so every backend fences with the same rules.
type LeaseStore interface {
	// Where names the record in messages: a path, an etcd key, a
	// namespace/name.
	Where() string
	// Read returns the record; ok is false when there has never been one.
	Read(ctx context.Context) (d Doc, ok bool, err error)
	// Update reads the record, calls fn with it, and writes what fn
	// returns (nil: nothing to write) only if no other writer changed the
	// record in between. On such a conflict it calls fn again on the new
	// record, a bounded number of times (RetryConflicts). fn's error is
	// returned as it is.
	Update(ctx context.Context, fn func(cur Doc, ok bool) (*Doc, error)) error
	// Close releases the backend's connections.
	Close() error
}

// ErrLeaseConflict is a compare-and-swap a backend lost: another router
// wrote the record between its read and its write.
var ErrLeaseConflict = errors.New("another router wrote the lease between read and write")

// ConflictRetries is how many times RetryConflicts runs an attempt.
const ConflictRetries = 4

// RetryConflicts runs attempt until it returns anything but a conflict,
// at most ConflictRetries times: a lost race re-reads the record, and the
// rules then see the winner (a claim becomes a *HeldError).
func RetryConflicts(ctx context.Context, where string, attempt func() error) error {
	var err error
	for i := 0; i < ConflictRetries; i++ {
		if err = attempt(); !errors.Is(err, ErrLeaseConflict) {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("lease %s: %w after %d attempts; the record is contended: the next renewal or claim tries again", where, err, ConflictRetries)
}
