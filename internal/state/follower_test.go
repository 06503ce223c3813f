package state

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// fakePrimary is a primary router's /ready and /narwhal/handoff on
// loopback; tests change what it answers.
type fakePrimary struct {
	mu          sync.Mutex
	readyStatus int
	readyBody   string
	handoff     []byte
	srv         *httptest.Server
}

func newPrimary(t *testing.T) *fakePrimary {
	p := &fakePrimary{readyStatus: 200, readyBody: `{"status":"ready","control_ready":true}`}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.WriteHeader(p.readyStatus)
		w.Write([]byte(p.readyBody))
	})
	mux.HandleFunc("GET /narwhal/handoff", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Write(p.handoff)
	})
	p.srv = httptest.NewServer(mux) // 127.0.0.1:0
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePrimary) set(fn func(p *fakePrimary)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

// serve makes the primary publish h, encoded as the router would.
func (p *fakePrimary) serve(t *testing.T, h *Handoff) {
	b, err := Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	p.set(func(p *fakePrimary) { p.handoff = b })
}

// standbyRig: primary A holding the lease at epoch 1, standby B following.
type standbyRig struct {
	clk     *ports.Fake
	primary *fakePrimary
	leaseA  *Lease
	f       *Follower
	doc     *Handoff
}

func newRig(t *testing.T) *standbyRig {
	dir := t.TempDir()
	clk := ports.NewFake(t0)
	leasePath := filepath.Join(dir, "lease.json")
	a := newLease(t, leasePath, "router-a", clk, 1)
	mustEpoch(t, a, 1)
	p := newPrimary(t)
	doc := fullDoc()
	doc.At, doc.Epoch, doc.Holder = unixS(t0), 1, a.Holder()
	p.serve(t, doc)
	f := &Follower{
		Primary: p.srv.URL + "/", Lease: newLease(t, leasePath, "router-b", clk, 2), Clock: clk,
		Engines: []string{"e0", "e1", "e2"}, Policy: PolicyIndividual,
		StatePath: filepath.Join(dir, "standby", "state.json"),
	}
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	return &standbyRig{clk: clk, primary: p, leaseA: a, f: f, doc: doc}
}

// step runs one probe and fails the test on a stop error.
func (r *standbyRig) step(t *testing.T) (*Handoff, int) {
	t.Helper()
	doc, epoch, err := r.f.step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return doc, epoch
}

func TestFollowerGoodProbeStoresAndWrites(t *testing.T) {
	r := newRig(t)
	if doc, _ := r.step(t); doc != nil {
		t.Fatal("took over from a healthy primary")
	}
	if r.f.LastMiss() != "" || r.f.FailoverBlocked() != "" {
		t.Fatalf("miss %q blocked %q after a good probe", r.f.LastMiss(), r.f.FailoverBlocked())
	}
	if st := r.f.Status(); st.GoodProbes != 1 || st.Misses != 0 || st.HandoffAt != r.doc.At || st.Primary != r.f.Primary {
		t.Fatalf("status after one good probe = %+v, want 1 good, 0 misses, handoff at %v", st, r.doc.At)
	}
	got, err := Read(r.f.StatePath)
	if err != nil || got.Epoch != 1 || got.Holder != r.leaseA.Holder() {
		t.Fatalf("standby state file = %+v, %v", got, err)
	}
}

func TestFollowerProbeMisses(t *testing.T) {
	cases := []struct {
		name string
		mut  func(t *testing.T, r *standbyRig)
		miss string // "" for a good probe
	}{
		{"503 with control_ready is good", func(t *testing.T, r *standbyRig) {
			r.primary.set(func(p *fakePrimary) {
				p.readyStatus, p.readyBody = 503, `{"control_ready": true, "reason": "whole-wave restart required: x"}`
			})
		}, ""},
		{"503 without control_ready", func(t *testing.T, r *standbyRig) {
			r.primary.set(func(p *fakePrimary) { p.readyStatus, p.readyBody = 503, `{"control_ready": false}` })
		}, "503 without control_ready"},
		{"ready other status", func(t *testing.T, r *standbyRig) {
			r.primary.set(func(p *fakePrimary) { p.readyStatus = 500 })
		}, "primary /ready: status 500"},
		{"unreachable", func(t *testing.T, r *standbyRig) { r.primary.srv.Close() }, "primary /ready:"},
		{"handoff invalid for this fleet", func(t *testing.T, r *standbyRig) {
			r.f.Engines = []string{"e0", "e1"}
		}, `names engine "e2"`},
		{"handoff torn", func(t *testing.T, r *standbyRig) {
			r.primary.set(func(p *fakePrimary) { p.handoff = p.handoff[:20] })
		}, "is not valid JSON"},
		{"holder differs from lease", func(t *testing.T, r *standbyRig) {
			d := *r.doc
			d.Holder = "router-x:00"
			r.primary.serve(t, &d)
		}, "does not match the lease"},
		{"lease expired", func(t *testing.T, r *standbyRig) { r.clk.Advance(ttl) }, "primary's lease has expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			tc.mut(t, r)
			r.step(t)
			if got := r.f.LastMiss(); (tc.miss == "") != (got == "") || !strings.Contains(got, tc.miss) {
				t.Fatalf("miss = %q, want %q", got, tc.miss)
			}
			want := FollowerStatus{Primary: r.f.Primary, GoodProbes: 0, Misses: 1, LastMiss: r.f.LastMiss()}
			if tc.miss == "" {
				want = FollowerStatus{Primary: r.f.Primary, GoodProbes: 1, HandoffAt: r.doc.At}
			}
			if st := r.f.Status(); st != want {
				t.Fatalf("status = %+v, want %+v", st, want)
			}
		})
	}
}

func TestFollowerStopsOnSchemaVersion(t *testing.T) {
	r := newRig(t)
	r.primary.set(func(p *fakePrimary) {
		p.handoff = []byte(strings.Replace(string(p.handoff), `"schema_version": 1`, `"schema_version": 2`, 1))
	})
	_, _, err := r.f.step(context.Background())
	var ve *VersionError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "handoff schema version 2 is newer than this build") {
		t.Fatalf("step = %v, want the loop stopped on the version", err)
	}
}

// The primary stops. The standby misses, but cannot claim while A's lease
// is unexpired; once it expires the standby claims epoch 2 and returns
// the stored epoch-1 document.
func TestFollowerTakeoverAfterLeaseExpiry(t *testing.T) {
	r := newRig(t)
	r.step(t)
	r.primary.srv.Close()
	for i := range DefaultTakeoverAfter {
		r.clk.Advance(DefaultStandbyInterval)
		if doc, _ := r.step(t); doc != nil {
			t.Fatalf("took over after %d misses while A's lease is unexpired", i+1)
		}
	}
	if d, _ := r.f.Lease.Current(); d.Holder != r.leaseA.Holder() {
		t.Fatalf("lease moved before expiry: %+v", d)
	}
	r.clk.Set(t0.Add(ttl))
	doc, epoch := r.step(t)
	if doc == nil || epoch != 2 || doc.Epoch != 1 || doc.Run != r.doc.Run {
		t.Fatalf("takeover = %v epoch %d, want the stored epoch-1 document at epoch 2", doc, epoch)
	}
	if !r.f.Lease.Valid() || r.leaseA.Renew() == nil {
		t.Fatal("after takeover B must hold a valid lease and A's renewal must fail")
	}
}

func TestFollowerStaleHandoffBlocks(t *testing.T) {
	r := newRig(t)
	r.step(t)
	r.primary.srv.Close()
	r.clk.Advance(DefaultMaxHandoffAge + time.Second)
	for range DefaultTakeoverAfter + 2 {
		if doc, _ := r.step(t); doc != nil {
			t.Fatal("took over with a stale handoff")
		}
	}
	if got := r.f.FailoverBlocked(); got != BlockedNoFreshHandoff {
		t.Fatalf("failover_blocked = %q, want %q", got, BlockedNoFreshHandoff)
	}
	if d, _ := r.f.Lease.Current(); d.Epoch != 1 {
		t.Fatalf("a blocked standby claimed the lease: %+v", d)
	}
}

func TestFollowerNoDocumentBlocks(t *testing.T) {
	r := newRig(t)
	r.primary.srv.Close()
	for range DefaultTakeoverAfter {
		r.step(t)
	}
	if got := r.f.FailoverBlocked(); got != BlockedNoFreshHandoff {
		t.Fatalf("failover_blocked = %q", got)
	}
}

// A third router took the lease (epoch 2) after the standby's last good
// probe and released it: the standby claims epoch 3, sees its epoch-1
// document does not precede it, releases and blocks until a good probe.
func TestFollowerEpochMismatchReleasesAndBlocks(t *testing.T) {
	r := newRig(t)
	r.step(t)
	r.primary.srv.Close()
	r.clk.Advance(ttl)
	c := newLease(t, r.leaseA.Where(), "router-c", r.clk, 3)
	mustEpoch(t, c, 2)
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	for range DefaultTakeoverAfter + 2 {
		if doc, _ := r.step(t); doc != nil {
			t.Fatal("took over with a handoff from two epochs back")
		}
	}
	if got := r.f.FailoverBlocked(); got != "handoff epoch 1 does not precede claimed lease epoch 3" {
		t.Fatalf("failover_blocked = %q", got)
	}
	d, err := r.f.Lease.Current()
	if err != nil || d.Epoch != 3 || !d.Expired(r.clk.Now()) || r.f.Lease.Valid() {
		t.Fatalf("lease after a blocked takeover = %+v, %v; want epoch 3 released", d, err)
	}
}

func TestFollowerRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := newRig(t)
	type result struct {
		doc   *Handoff
		epoch int
		err   error
	}
	out := make(chan result, 1)
	go func() {
		doc, epoch, err := r.f.Run(context.Background())
		out <- result{doc, epoch, err}
	}()
	waitPending(t, r.clk) // first probe done: good
	r.primary.srv.Close()
	for range 200 { // the lease expires after 20 intervals
		select {
		case res := <-out:
			if res.err != nil || res.epoch != 2 || res.doc.Epoch != 1 {
				t.Fatalf("Run = %+v", res)
			}
			if r.clk.Now().Before(t0.Add(ttl)) {
				t.Fatal("took over before the old lease expired")
			}
			return
		default:
		}
		waitFor(t, func() bool { return r.clk.Pending() > 0 || len(out) > 0 })
		if len(out) == 0 {
			r.clk.Advance(DefaultStandbyInterval)
		}
	}
	t.Fatal("no takeover within 200 intervals")
}

func TestFollowerRunStopsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := r.f.Run(ctx)
		errc <- err
	}()
	waitPending(t, r.clk)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	r.f.HTTP.CloseIdleConnections()
	r.primary.srv.Close() // before goleak looks, not at cleanup
}

func TestFollowerConfig(t *testing.T) {
	f := &Follower{Primary: "http://127.0.0.1:1", Clock: ports.NewFake(t0)}
	if _, _, err := f.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "requires --lease-path") {
		t.Fatalf("Run without a lease = %v", err)
	}
}
