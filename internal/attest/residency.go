package attest

import (
	"net/http"
	"strconv"

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
