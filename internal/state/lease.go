package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// Lease is this router's handle on the shared narwhal.router-lease record
// (runtime.md §3.8), wherever a LeaseStore keeps it. The fencing rules —
// epochs, holder tokens, expiry, self-fencing by the local clock — live
// here once, so every backend fences the same way. Its methods are safe
// for concurrent use.
type Lease struct {
	store                LeaseStore
	holder               string
	ttl, renewEvery, mrg time.Duration
	clock                ports.Clock

	// op serialises this handle's file operations; mu guards the fields
	// below and is never held across file I/O, so Valid and Epoch answer
	// at once even while a renewal waits on a hung shared filesystem (the
	// router then fences itself by the clock instead of hanging /ready).
	op     sync.Mutex
	mu     sync.Mutex
	owned  bool
	epoch  int
	anchor time.Time // clock time taken before the last successful claim or renew
	// fence is anchor + ttl − margin while owned, nil when not: written
	// with mu held whenever owned or anchor change, read by Valid without
	// it (the request path asks on every admission).
	fence atomic.Pointer[time.Time]
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewLease returns a lease handle for routerID on the lease file at path
// (the file backend: one host or a shared filesystem with flock).
func NewLease(path, routerID string, ttl, renewEvery, safetyMargin time.Duration,
	clock ports.Clock, ids ports.IDGenerator) (*Lease, error) {
	if path == "" {
		return nil, errors.New("lease: --lease-path is empty; set it to a file on storage shared by the routers")
	}
	return NewLeaseOn(FileStore(path), routerID, ttl, renewEvery, safetyMargin, clock, ids)
}

// NewLeaseOn returns a lease handle for routerID on store. The holder
// token is "<routerID>:<32 hex>" with the hex from ids, so two processes
// with the same router id still hold different tokens. ttl must exceed
// renewEvery + safetyMargin, or a router could fence itself between two
// renewals while healthy.
func NewLeaseOn(store LeaseStore, routerID string, ttl, renewEvery, safetyMargin time.Duration,
	clock ports.Clock, ids ports.IDGenerator) (*Lease, error) {
	switch {
	case store == nil:
		return nil, errors.New("lease: no lease store")
	case routerID == "":
		return nil, errors.New("lease: --router-id is empty; give each router a name")
	case clock == nil || ids == nil:
		return nil, errors.New("lease: a clock and an id generator are required")
	case renewEvery <= 0 || safetyMargin < 0:
		return nil, fmt.Errorf("lease: --lease-renew-interval %v must be positive and --lease-safety-margin %v not negative", renewEvery, safetyMargin)
	case ttl <= renewEvery+safetyMargin:
		return nil, fmt.Errorf("lease: --lease-ttl %v must exceed --lease-renew-interval %v + --lease-safety-margin %v", ttl, renewEvery, safetyMargin)
	}
	id := ids.NewID()
	if !hex32.MatchString(id) {
		return nil, fmt.Errorf("lease: holder id %q is not 32 lower-case hex; use ports.RandomIDs", id)
	}
	return &Lease{store: store, holder: routerID + ":" + id,
		ttl: ttl, renewEvery: renewEvery, mrg: safetyMargin, clock: clock}, nil
}

// HeldError is a claim refused because another router holds an
// unexpired lease.
type HeldError struct {
	Path      string
	Holder    string
	Epoch     int
	ExpiresAt float64 // Unix seconds
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s (epoch %d) until %s; wait for it to expire or stop that router",
		e.Path, e.Holder, e.Epoch, fromUnixS(e.ExpiresAt).Format(time.RFC3339Nano))
}

// Holder is this router's token, "<router-id>:<32 hex>".
func (l *Lease) Holder() string { return l.holder }

// Timing is the lease's ttl, renew interval and safety margin: what a
// fenced router paces its claims by.
func (l *Lease) Timing() (ttl, renewEvery, margin time.Duration) {
	return l.ttl, l.renewEvery, l.mrg
}

// Epoch returns the epoch of the last successful claim (0 before any).
func (l *Lease) Epoch() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Valid reports whether this router may act as the lease holder: it owns
// the lease and, by its own clock, less than ttl − safety margin has
// passed since the last claim or renew. The router thus fences itself
// before the shared expiry that a standby waits for.
func (l *Lease) Valid() bool {
	f := l.fence.Load()
	return f != nil && l.clock.Now().Before(*f)
}

// setLocked records the hold (owned, anchor) and publishes its fence.
// Called with mu held.
func (l *Lease) setLocked(owned bool, anchor time.Time) {
	l.owned, l.anchor = owned, anchor
	if !owned {
		l.fence.Store(nil)
		return
	}
	f := anchor.Add(l.ttl - l.mrg)
	l.fence.Store(&f)
}

// Current reads the shared lease. No lease yet is an error for which
// errors.Is(err, fs.ErrNotExist) holds.
func (l *Lease) Current() (Doc, error) {
	ctx, cancel := l.opContext()
	defer cancel()
	d, ok, err := l.store.Read(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("lease %s: no lease yet: %w", l.store.Where(), fs.ErrNotExist)
	}
	return d, err
}

// Where names the shared record: a path, an etcd key, a Kubernetes Lease.
func (l *Lease) Where() string { return l.store.Where() }

// opContext bounds one store operation: past ttl − margin a renewal is
// moot (the router has fenced itself by the clock), and a claim retries.
func (l *Lease) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), l.ttl-l.mrg)
}

// Claim takes the lease if it is absent or expired (epoch + 1), extends
// it if this router already holds it (same epoch), and otherwise fails
// with a *HeldError. It returns the epoch held. A handle that lost its
// hold (a failed renewal) and finds the record still naming it takes a
// new epoch too: the renewal may have failed after the store wrote it, or
// writes of the lost term may still be on their way, and the fencing rule
// refuses them only if the epoch moved on.
func (l *Lease) Claim() (int, error) {
	l.op.Lock()
	defer l.op.Unlock()
	now := l.clock.Now()
	l.mu.Lock()
	held, heldEpoch := l.owned, l.epoch
	l.mu.Unlock()
	var epoch int
	ctx, cancel := l.opContext()
	defer cancel()
	err := l.store.Update(ctx, func(cur Doc, ok bool) (*Doc, error) {
		next := Doc{Epoch: 1, Holder: l.holder, ExpiresAt: unixS(now.Add(l.ttl)), UpdatedAt: unixS(now)}
		switch {
		case ok && !cur.Expired(now) && cur.Holder != l.holder:
			return nil, &HeldError{Path: l.store.Where(), Holder: cur.Holder, Epoch: cur.Epoch, ExpiresAt: cur.ExpiresAt}
		case ok && !cur.Expired(now) && held && cur.Epoch == heldEpoch:
			next.Epoch = cur.Epoch // ours and still held: keep the epoch, extend
		case ok:
			next.Epoch = cur.Epoch + 1
		}
		epoch = next.Epoch
		return &next, nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.setLocked(false, l.anchor)
		return 0, err
	}
	l.epoch = epoch
	l.setLocked(true, now)
	return epoch, nil
}

// Renew extends the lease if the shared record still names this router at
// the same epoch and has not expired. Any failure leaves the lease not
// owned: the router must stop acting as the holder.
func (l *Lease) Renew() error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	owned, epoch := l.owned, l.epoch
	l.mu.Unlock()
	where := l.store.Where()
	if !owned {
		return fmt.Errorf("lease %s: renew: this router does not hold the lease; claim it first", where)
	}
	now := l.clock.Now()
	ctx, cancel := l.opContext()
	defer cancel()
	err := l.store.Update(ctx, func(cur Doc, ok bool) (*Doc, error) {
		switch {
		case !ok:
			return nil, fmt.Errorf("lease %s: renew: the lease record is gone", where)
		case cur.Expired(now):
			return nil, fmt.Errorf("lease %s: renew: expired at %s before it was renewed", where,
				fromUnixS(cur.ExpiresAt).Format(time.RFC3339Nano))
		case cur.Holder != l.holder || cur.Epoch != epoch:
			return nil, fmt.Errorf("lease %s: renew: now held by %s at epoch %d (ours was epoch %d): another router took over",
				where, cur.Holder, cur.Epoch, epoch)
		}
		return &Doc{Epoch: epoch, Holder: l.holder, ExpiresAt: unixS(now.Add(l.ttl)), UpdatedAt: unixS(now)}, nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.setLocked(false, l.anchor)
		return err
	}
	l.setLocked(l.owned, now)
	return nil
}

// Release ends this router's hold: the shared lease expires now if it is
// still ours at our epoch, so a standby can claim it without waiting out
// the ttl. The handle is no longer owned afterwards either way.
func (l *Lease) Release() error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	l.setLocked(false, l.anchor)
	epoch := l.epoch
	l.mu.Unlock()
	if epoch == 0 {
		return nil
	}
	now := l.clock.Now()
	ctx, cancel := l.opContext()
	defer cancel()
	return l.store.Update(ctx, func(cur Doc, ok bool) (*Doc, error) {
		if !ok || cur.Holder != l.holder || cur.Epoch != epoch {
			return nil, nil // not ours any more: nothing to release
		}
		cur.ExpiresAt, cur.UpdatedAt = unixS(now), unixS(now)
		return &cur, nil
	})
}

// Close releases the store's connections (not the lease: see Release).
func (l *Lease) Close() error { return l.store.Close() }

// RunRenewals renews the lease every renew interval until ctx ends. On
// the first failure it calls onLost with the error and returns: the
// router is fenced ("lease renewal failed; retrying") and claims again
// (internal/takeover), at a new epoch.
func (l *Lease) RunRenewals(ctx context.Context, onLost func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.clock.After(l.renewEvery):
		}
		if err := l.Renew(); err != nil {
			onLost(err)
			return
		}
	}
}
