// Package leasetest is the conformance suite every state.LeaseStore
// passes: the file, etcd and Kubernetes backends run the same sequence of
// claims, renewals, self-fencing, takeovers, releases and racing claims,
// so "the same fencing semantics" is a test, not a promise.
package leasetest

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

// Lease timing of the suite: whole seconds, as etcd and Kubernetes keep.
const (
	TTL    = 5 * time.Second
	Renew  = time.Second
	Margin = time.Second
)

// T0 is the suite's fake start time.
var T0 = time.Unix(1790000000, 0)

// NewRecord returns a function that opens a new handle on one fresh
// record each time it is called (a second router's client).
type NewRecord func(t *testing.T) func() state.LeaseStore

// Run runs the suite against a backend.
func Run(t *testing.T, rec NewRecord) {
	t.Run("TwoRouters", func(t *testing.T) { twoRouters(t, rec(t)) })
	t.Run("RacingClaims", func(t *testing.T) { racingClaims(t, rec(t)) })
	t.Run("EpochSurvivesRelease", func(t *testing.T) { epochSurvivesRelease(t, rec(t)) })
	t.Run("ReclaimAfterLoss", func(t *testing.T) { reclaimAfterLoss(t, rec(t)) })
}

// Outage is a store that fails every call while Down is set: the backend
// unreachable, then back with its record as it was.
type Outage struct {
	state.LeaseStore
	Down atomic.Bool
}

// ErrOutage is what an Outage answers while down.
var ErrOutage = errors.New("lease store unreachable (test outage)")

func (o *Outage) Read(ctx context.Context) (state.Doc, bool, error) {
	if o.Down.Load() {
		return state.Doc{}, false, ErrOutage
	}
	return o.LeaseStore.Read(ctx)
}

func (o *Outage) Update(ctx context.Context, fn func(state.Doc, bool) (*state.Doc, error)) error {
	if o.Down.Load() {
		return ErrOutage
	}
	return o.LeaseStore.Update(ctx, fn)
}

// reclaimAfterLoss: a renewal that fails while the store is unreachable
// fences the holder; once the store is back the same handle claims
// again at a new epoch, whether or not the record expired meanwhile, so
// writes of the lost term stay refused.
func reclaimAfterLoss(t *testing.T, open func() state.LeaseStore) {
	clk := ports.NewFake(T0)
	o := &Outage{LeaseStore: open()}
	a := NewLease(t, o, "a", clk, 1)
	mustClaim(t, a, 1)
	o.Down.Store(true)
	clk.Advance(Renew)
	if err := a.Renew(); !errors.Is(err, ErrOutage) || a.Valid() {
		t.Fatalf("renewal with the store down = %v (valid %v), want it failed and fenced", err, a.Valid())
	}
	o.Down.Store(false)
	mustClaim(t, a, 2) // the record is still ours and unexpired: a new epoch all the same
	o.Down.Store(true)
	clk.Advance(Renew)
	_ = a.Renew()
	clk.Advance(TTL + time.Second) // a long outage: the record expired
	o.Down.Store(false)
	mustClaim(t, a, 3)
	clk.Advance(Renew)
	if err := a.Renew(); err != nil || !a.Valid() {
		t.Fatalf("renewal after the reclaim = %v (valid %v)", err, a.Valid())
	}
}

// NewLease is a lease handle on store for router id under clk.
func NewLease(t *testing.T, store state.LeaseStore, id string, clk ports.Clock, seed uint64) *state.Lease {
	t.Helper()
	l, err := state.NewLeaseOn(store, id, TTL, Renew, Margin, clk, ports.SeededIDs(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustClaim(t *testing.T, l *state.Lease, want int) {
	t.Helper()
	got, err := l.Claim()
	if err != nil || got != want {
		t.Fatalf("%s claim = %d, %v; want epoch %d", l.Holder(), got, err, want)
	}
}

func mustRecord(t *testing.T, l *state.Lease, epoch int, holder string, expires time.Time) {
	t.Helper()
	d, err := l.Current()
	if err != nil {
		t.Fatal(err)
	}
	if d.Epoch != epoch || d.Holder != holder || d.Expired(expires.Add(-time.Millisecond)) || !d.Expired(expires.Add(time.Second)) {
		t.Fatalf("record %+v; want epoch %d holder %s expiring at %v (within a second: backends round up)", d, epoch, holder, expires)
	}
}

// twoRouters: claim, refusal, extension, renewal, local fencing before
// the shared expiry, takeover at epoch + 1, the old holder's renewal
// failing, release.
func twoRouters(t *testing.T, open func() state.LeaseStore) {
	clk := ports.NewFake(T0)
	a := NewLease(t, open(), "router-a", clk, 1)
	b := NewLease(t, open(), "router-b", clk, 2)
	if _, err := a.Current(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Current before any claim = %v, want fs.ErrNotExist", err)
	}
	mustClaim(t, a, 1)
	mustRecord(t, b, 1, a.Holder(), T0.Add(TTL))
	_, err := b.Claim()
	var held *state.HeldError
	if !errors.As(err, &held) || held.Holder != a.Holder() || held.Epoch != 1 || !strings.Contains(err.Error(), "until 2026-") {
		t.Fatalf("B's claim = %v, want HeldError naming A at epoch 1 and its expiry", err)
	}
	mustClaim(t, a, 1) // ours: same epoch, extended
	clk.Advance(Renew)
	if err := a.Renew(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, b, 1, a.Holder(), T0.Add(Renew+TTL))
	clk.Advance(TTL - Margin - time.Millisecond)
	if !a.Valid() {
		t.Fatal("A must still be valid just before ttl − margin")
	}
	clk.Advance(time.Millisecond)
	if a.Valid() {
		t.Fatal("A must fence itself at ttl − margin, before the shared expiry")
	}
	if _, err := b.Claim(); !errors.As(err, &held) {
		t.Fatalf("B claimed before the shared expiry: %v", err)
	}
	clk.Advance(Margin + time.Second) // past the shared expiry, rounded up
	mustClaim(t, b, 2)
	err = a.Renew()
	if err == nil || !strings.Contains(err.Error(), "another router took over") || a.Valid() {
		t.Fatalf("A's renewal after takeover = %v (valid %v), want refused and fenced", err, a.Valid())
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, a, 2, b.Holder(), clk.Now().Add(TTL)) // A's release left B's lease alone
	if err := b.Release(); err != nil || b.Valid() {
		t.Fatalf("B's release: %v (valid %v)", err, b.Valid())
	}
	mustClaim(t, a, 3) // a released lease is expired: claim at once
}

// racingClaims: routers claiming at once on their own clients, first on
// no record, then on an expired one; each time exactly one holds the
// lease at the next epoch, the rest see it held.
func racingClaims(t *testing.T, open func() state.LeaseStore) {
	clk := ports.NewFake(T0)
	const n = 5
	leases := make([]*state.Lease, n)
	for i := range leases {
		leases[i] = NewLease(t, open(), "router", clk, uint64(10+i))
	}
	race(t, leases, 1)
	clk.Advance(TTL + time.Second)
	race(t, leases, 2)
}

func race(t *testing.T, leases []*state.Lease, epoch int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	got := make([]int, len(leases))
	for i, l := range leases {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = l.Claim() }()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		var held *state.HeldError
		switch {
		case err == nil && got[i] == epoch:
			won++
		case err == nil:
			t.Errorf("router %d claimed epoch %d, want %d", i, got[i], epoch)
		case !errors.As(err, &held):
			t.Errorf("router %d: %v, want a claim or a HeldError", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d routers claimed epoch %d at once, want exactly 1 (%v)", won, epoch, errs)
	}
}

// epochSurvivesRelease: released and re-claimed by the same router, the
// epoch still moves on, so a handoff document can tell terms apart.
func epochSurvivesRelease(t *testing.T, open func() state.LeaseStore) {
	clk := ports.NewFake(T0)
	a := NewLease(t, open(), "a", clk, 1)
	for want := 1; want <= 3; want++ {
		mustClaim(t, a, want)
		clk.Advance(Renew)
		if err := a.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
