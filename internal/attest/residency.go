package attest

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/residency"
)

// residencyRoutes serves GET /v1/residency and GET /v1/residency/events
// behind the same identity gate as the attestation: a changed engine
// process answers 503, an engine without cache events 404.
func (s *Sidecar) residencyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/residency", func(w http.ResponseWriter, r *http.Request) {
		if x := s.residencyGate(w, r); x != nil {
			writeJSON(w, http.StatusOK, x.Snapshot())
		}
	})
	mux.HandleFunc("GET /v1/residency/events", func(w http.ResponseWriter, r *http.Request) {
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "after must be an integer sequence number, e.g. ?after=-1"})
			return
		}
		x := s.residencyGate(w, r)
		if x == nil {
			return
		}
		ev, ok := x.Since(after)
		if !ok {
			writeJSON(w, http.StatusGone, map[string]string{"detail": residency.ResyncError})
			return
		}
		writeJSON(w, http.StatusOK, ev)
	})
}

// residencyGate returns the index, or nil once it has answered.
func (s *Sidecar) residencyGate(w http.ResponseWriter, r *http.Request) *residency.Index {
	if s.opts.Residency == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": residency.NoEventsError})
		return nil
	}
	if !s.gate(w, r) {
		return nil
	}
	return s.opts.Residency
}

// KVEvents is where the engine publishes its KV cache events, and how it
// hashes blocks (nil skips the seed check).
type KVEvents struct {
	Subscriber kvevents.Subscriber
	Hasher     *kvevents.Hasher
}

// ServeKV is Serve for an engine that publishes KV cache events: the
// sidecar also follows them (residency.Follow) and serves the residency
// routes until Close.
func ServeKV(ctx context.Context, doc *Document, engineBase, addr string, log *slog.Logger, kv KVEvents) (*Server, error) {
	s, c, err := inProcess(ctx, doc, engineBase, log)
	if err != nil {
		return nil, err
	}
	s.EnableResidency(kv.Hasher)
	srv, err := s.Listen(addr)
	if err != nil {
		c.Close()
		return nil, err
	}
	srv.FollowKV(kv.Subscriber)
	return srv, nil
}

// EnableResidency gives the sidecar a residency index for the bound
// engine process (h verifies its hash seed; nil skips). Call it before
// Listen, then FollowKV.
func (s *Sidecar) EnableResidency(h *kvevents.Hasher) {
	s.opts.Residency = residency.NewIndex(residency.NewEpoch(), s.bound.ProcessStart, h)
}

// FollowKV feeds the sidecar's residency index from sub until Close.
func (s *Server) FollowKV(sub kvevents.Subscriber) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		residency.Follow(ctx, sub, s.opts.Residency, time.Second)
	}()
	s.stopKV = func() { cancel(); <-done }
}

// KVSource is an engine that may publish KV cache events (a simengine).
type KVSource interface {
	KVEventEndpoints() (pub, replay string)
	PrefixHasher() *kvevents.Hasher
}

// ServeEngine is ServeKV when src publishes KV cache events, else Serve.
func ServeEngine(ctx context.Context, doc *Document, engineBase, addr string, log *slog.Logger, src KVSource) (*Server, error) {
	if pub, rep := src.KVEventEndpoints(); pub != "" {
		kv := KVEvents{Subscriber: kvevents.Subscriber{Endpoint: pub, ReplayEndpoint: rep}, Hasher: src.PrefixHasher()}
		return ServeKV(ctx, doc, engineBase, addr, log, kv)
	}
	return Serve(ctx, doc, engineBase, addr, log)
}
