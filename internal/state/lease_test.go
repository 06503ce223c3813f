package state

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

var t0 = time.Unix(1790000000, 0)

const (
	ttl    = 5 * time.Second
	renew  = time.Second
	margin = time.Second
)

func newLease(t *testing.T, path, id string, clk ports.Clock, seed uint64) *Lease {
	t.Helper()
	l, err := NewLease(path, id, ttl, renew, margin, clk, ports.SeededIDs(seed))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewLeaseValidation(t *testing.T) {
	clk := ports.NewFake(t0)
	ids := ports.SeededIDs(1)
	cases := []struct {
		name, path, id  string
		ttl, renew, mrg time.Duration
		ids             ports.IDGenerator
		want            string
	}{
		{"ok", "l", "a", 5 * time.Second, time.Second, time.Second, ids, ""},
		{"no path", "", "a", 5 * time.Second, time.Second, time.Second, ids, "--lease-path is empty"},
		{"no router id", "l", "", 5 * time.Second, time.Second, time.Second, ids, "--router-id is empty"},
		{"ttl too short", "l", "a", 2 * time.Second, time.Second, time.Second, ids, "--lease-ttl 2s must exceed"},
		{"zero renew", "l", "a", 5 * time.Second, 0, time.Second, ids, "--lease-renew-interval 0s must be positive"},
		{"negative margin", "l", "a", 5 * time.Second, time.Second, -1, ids, "must be positive and --lease-safety-margin"},
		{"non-hex ids", "l", "a", 5 * time.Second, time.Second, time.Second, ports.Sequential("x"), "is not 32 lower-case hex"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLease(tc.path, tc.id, tc.ttl, tc.renew, tc.mrg, clk, tc.ids)
			if tc.want == "" {
				if err != nil || !hex32.MatchString(strings.TrimPrefix(l.Holder(), "a:")) {
					t.Fatalf("err %v, holder %q", err, l.Holder())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRenewAfterSharedExpiry(t *testing.T) {
	clk := ports.NewFake(t0)
	a := newLease(t, filepath.Join(t.TempDir(), "lease.json"), "a", clk, 1)
	mustEpoch(t, a, 1)
	clk.Advance(ttl)
	if err := a.Renew(); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("renew after expiry = %v, want refused", err)
	}
	if err := a.Renew(); err == nil || !strings.Contains(err.Error(), "claim it first") {
		t.Fatalf("renew when not owned = %v", err)
	}
	mustEpoch(t, a, 2) // expired, even if ours: a new epoch
}

func TestLeaseFileStrict(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"extra field", `{"schema":"narwhal.router-lease","schema_version":1,"epoch":1,"holder":"x","expires_at":1,"updated_at":1,"note":"hi"}`, `unknown field "note"`},
		{"newer", `{"schema":"narwhal.router-lease","schema_version":2}`, "lease schema version 2 is newer than this build (writes and reads 1)"},
		{"epoch zero", `{"schema":"narwhal.router-lease","schema_version":1,"epoch":0,"holder":"x","expires_at":1,"updated_at":1}`, "epoch is 0, must be ≥ 1"},
		{"torn", `{"schema":"narwhal.rou`, "not valid JSON"},
		{"other schema", `{"schema":"narwhal.handoff","schema_version":1}`, "not a router lease"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lease.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			a := newLease(t, path, "a", ports.NewFake(t0), 1)
			_, err := a.Claim()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("claim = %v, want %q naming the file", err, tc.want)
			}
			if a.Valid() {
				t.Fatal("valid after a failed claim")
			}
		})
	}
}

// Without the flock, routers racing on an absent lease could each read
// "absent" and each write epoch 1. With it, exactly one wins.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	for round := range 5 {
		clk := ports.NewFake(t0)
		path := filepath.Join(t.TempDir(), "lease.json")
		const n = 8
		leases := make([]*Lease, n)
		for i := range leases {
			leases[i] = newLease(t, path, "r", clk, uint64(round*n+i+1))
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = l.Claim()
			}()
		}
		wg.Wait()
		var winners []string
		for i, err := range errs {
			var held *HeldError
			switch {
			case err == nil:
				winners = append(winners, leases[i].Holder())
			case !errors.As(err, &held):
				t.Fatalf("claim %d: unexpected error %v", i, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, len(winners))
		}
		assertLeaseFile(t, path, 1, winners[0], t0.Add(ttl))
	}
}

func TestRunRenewals(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	a := newLease(t, path, "a", clk, 1)
	mustEpoch(t, a, 1)
	lost := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunRenewals(ctx, func(err error) { lost <- err })
	}()
	for i := 1; i <= 3; i++ {
		waitPending(t, clk)
		clk.Advance(renew)
		waitFor(t, func() bool { d, _ := a.Current(); return d.UpdatedAt == unixS(t0.Add(time.Duration(i)*renew)) })
	}
	// Another router overwrites the lease (as after a partition): the next
	// renewal fails, onLost hears why, and the loop stops.
	waitPending(t, clk)
	f := leaseFile{path}
	if err := f.locked(func() error {
		return f.write(Doc{Epoch: 2, Holder: "b:x", ExpiresAt: unixS(clk.Now().Add(ttl)), UpdatedAt: unixS(clk.Now())})
	}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(renew)
	if err := <-lost; !strings.Contains(err.Error(), "another router took over") {
		t.Fatalf("onLost got %v", err)
	}
	<-done
	if a.Valid() {
		t.Fatal("valid after a lost renewal")
	}
}

func TestRunRenewalsStopsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := ports.NewFake(t0)
	a := newLease(t, filepath.Join(t.TempDir(), "lease.json"), "a", clk, 1)
	mustEpoch(t, a, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunRenewals(ctx, func(err error) { t.Errorf("onLost(%v) on cancel", err) })
	}()
	waitPending(t, clk)
	cancel()
	<-done
}

func mustEpoch(t *testing.T, l *Lease, want int) {
	t.Helper()
	got, err := l.Claim()
	if err != nil || got != want || l.Epoch() != want {
		t.Fatalf("claim = %d, %v; want epoch %d", got, err, want)
	}
}

// assertLeaseFile checks the file has exactly the six fields and values.
func assertLeaseFile(t *testing.T, path string, epoch int, holder string, expires time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "epoch,expires_at,holder,schema,schema_version,updated_at" {
		t.Errorf("lease fields = %s", got)
	}
	if m["schema"] != LeaseSchema || m["schema_version"] != 1.0 || m["epoch"] != float64(epoch) ||
		m["holder"] != holder || m["expires_at"] != unixS(expires) {
		t.Errorf("lease = %s\nwant epoch %d holder %s expires %v", b, epoch, holder, unixS(expires))
	}
}

// waitPending waits (bounded) until a goroutine has a timer on the clock.
func waitPending(t *testing.T, clk *ports.Fake) {
	t.Helper()
	waitFor(t, func() bool { return clk.Pending() > 0 })
}

// waitFor polls cond for up to 10 s of real time; it bounds the test, it
// does not assert timing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, time.Millisecond, "the condition", cond)
}

// A renewal stuck on the lock (a hung shared filesystem) must not stall
// Valid: the router fences itself by its clock while the renewal waits.
func TestValidDoesNotWaitForStuckRenewal(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	a := newLease(t, path, "a", clk, 1)
	mustEpoch(t, a, 1)
	held := make(chan struct{})
	unlock := make(chan struct{})
	go func() {
		leaseFile{path}.locked(func() error { close(held); <-unlock; return nil })
	}()
	<-held
	renewed := make(chan error, 1)
	go func() { renewed <- a.Renew() }()
	clk.Advance(ttl - margin)
	if a.Valid() {
		t.Fatal("valid past ttl − margin while the renewal is stuck")
	}
	close(unlock)
	if err := <-renewed; err != nil {
		t.Fatalf("renewal after the lock freed: %v", err)
	}
}
