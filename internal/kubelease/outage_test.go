package kubelease

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

// apiServer is leaseServer on a fixed loopback port that can be stopped
// (connections refused) and started again with its leases kept.
type apiServer struct {
	t    *testing.T
	addr string
	h    *leaseServer
	srv  *http.Server
}

func startAPIServer(t *testing.T) *apiServer {
	s := &apiServer{t: t, addr: "127.0.0.1:0", h: &leaseServer{leases: map[string]coordv1.Lease{}}}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *apiServer) start() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: s.h}
	go func() { _ = s.srv.Serve(ln) }()
}

func (s *apiServer) stop() {
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// An API server outage fails the holder's renewal; meanwhile (once the
// server is back) another router took the expired lease and let it lapse,
// so the Lease's resourceVersion and epoch moved on. The old holder's
// claim reads the new version and takes the lease at the next epoch.
func TestRESTStoreReclaimsAfterAnOutage(t *testing.T) {
	api := startAPIServer(t)
	clk := ports.NewFake(leasetest.T0)
	a := leasetest.NewLease(t, restStore(t, "http://"+api.addr, "narwhal"), "a", clk, 1)
	b := leasetest.NewLease(t, restStore(t, "http://"+api.addr, "narwhal"), "b", clk, 2)
	if _, err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	api.stop()
	clk.Advance(leasetest.Renew)
	if err := a.Renew(); err == nil || a.Valid() {
		t.Fatalf("renewal with the API server down = %v (valid %v), want failed and fenced", err, a.Valid())
	}
	clk.Advance(leasetest.TTL + time.Second)
	api.start()
	if epoch, err := b.Claim(); err != nil || epoch != 2 {
		t.Fatalf("B's claim of the expired lease = %d, %v; want epoch 2", epoch, err)
	}
	var held *state.HeldError
	if _, err := a.Claim(); !errors.As(err, &held) {
		t.Fatalf("A's claim while B holds the lease = %v, want a HeldError", err)
	}
	clk.Advance(leasetest.TTL + time.Second) // B stops renewing
	if epoch, err := a.Claim(); err != nil || epoch != 3 {
		t.Fatalf("A's claim after B's lease lapsed = %d, %v; want epoch 3", epoch, err)
	}
	clk.Advance(leasetest.Renew)
	if err := a.Renew(); err != nil || !a.Valid() {
		t.Fatalf("A's renewal after the reclaim = %v (valid %v)", err, a.Valid())
	}
}
