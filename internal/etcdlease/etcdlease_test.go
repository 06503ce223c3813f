package etcdlease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/etcdlease"
	"github.com/narwhal-go/narwhal/internal/etcdlease/etcdtest"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

func open(t *testing.T, endpoint, key string) *etcdlease.Store {
	t.Helper()
	s, err := etcdlease.Open([]string{endpoint}, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEtcdStoreConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	n := 0
	leasetest.Run(t, func(t *testing.T) func() state.LeaseStore {
		n++
		key := fmt.Sprintf("/test/conformance-%d", n)
		return func() state.LeaseStore { return open(t, srv.Endpoint(), key) }
	})
}

// A holder that stops renewing loses its key by etcd's clock: the record
// reads as expired (a standby claims at epoch + 1) even though its
// expires_at, by a wall clock that lags, lies in the future.
func TestEtcdExpiresAStoppedHolderByItsOwnClock(t *testing.T) {
	srv := etcdtest.Start(t)
	slow := ports.NewFake(time.Now().Add(-time.Hour)) // the dead holder's clock is an hour behind
	a, err := state.NewLeaseOn(open(t, srv.Endpoint(), "/test/ttl"), "a", 2*time.Second, 500*time.Millisecond, 500*time.Millisecond, slow, ports.RandomIDs())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	b := leasetest.NewLease(t, open(t, srv.Endpoint(), "/test/ttl"), "b", ports.NewFake(time.Now().Add(-time.Hour)), 2)
	var held *state.HeldError
	if _, err := b.Claim(); !errors.As(err, &held) {
		t.Fatalf("B claimed a live lease: %v", err)
	}
	deadline := time.Now().Add(6 * time.Second)
	for {
		epoch, err := b.Claim()
		if err == nil {
			if epoch != 2 {
				t.Fatalf("B claimed epoch %d, want 2", epoch)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not expire A's key within 6 s (ttl 2 s): %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With etcd down a holder cannot renew: it fences by its clock at
// ttl − margin, and its renewal fails instead of hanging.
func TestEtcdDownFencesTheHolder(t *testing.T) {
	srv := etcdtest.Start(t)
	a, err := state.NewLeaseOn(open(t, srv.Endpoint(), "/test/down"), "a", 2*time.Second, 500*time.Millisecond, 500*time.Millisecond,
		ports.SystemClock(), ports.RandomIDs())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()
	srv.Stop()
	start := time.Now()
	if err := a.Renew(); err == nil {
		t.Fatal("renewed with etcd down")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("renewal took %v with etcd down, want it bounded by ttl − margin (1.5 s)", d)
	}
	if a.Valid() {
		t.Fatalf("a failed renewal %v after the claim left the lease valid", time.Since(claimed))
	}
	srv.Start()
	if _, err := a.Claim(); err != nil {
		t.Fatalf("claim after etcd came back: %v", err)
	}
}
