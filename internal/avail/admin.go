package avail

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The lifecycle routes (runtime.md §3.5): GET /narwhal/lifecycle and the
// operator actions POST /narwhal/lifecycle/drain and …/readmit. The
// router mounts them behind its admin guard.

// lifecycleRequest is the body of drain and readmit.
type lifecycleRequest struct {
	IID       string   `json:"iid"`
	Engines   []string `json:"engines"`
	Wave      bool     `json:"wave"`
	DeadlineS *float64 `json:"deadline_s"`
}

func (s *Supervisor) parseLifecycle(w http.ResponseWriter, req *http.Request) (string, *lifecycleRequest, bool) {
	var lr lifecycleRequest
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	if err := json.Unmarshal(body, &lr); err != nil {
		s.lifecycleReply(w, http.StatusBadRequest, "request body must be JSON: {\"iid\": \"<engine>\"}")
		return "", nil, false
	}
	if lr.Wave {
		s.lifecycleReply(w, http.StatusConflict, "whole-wave drains are not supported by this build: drain engines one at a time; under a whole-wave hold, restart every engine and POST readmit {\"wave\": true}")
		return "", nil, false
	}
	iids := lr.Engines
	if lr.IID != "" {
		iids = append(iids, lr.IID)
	}
	if len(iids) != 1 {
		s.lifecycleReply(w, http.StatusConflict, "name exactly one engine: {\"iid\": \"<engine>\"}")
		return "", nil, false
	}
	return iids[0], &lr, true
}

// ServeDrain is POST /narwhal/lifecycle/drain.
func (s *Supervisor) ServeDrain(w http.ResponseWriter, req *http.Request) {
	iid, lr, ok := s.parseLifecycle(w, req)
	if !ok {
		return
	}
	deadline := 300.0
	if lr.DeadlineS != nil {
		deadline = *lr.DeadlineS
	}
	lastLive := s.Usable(iid) && s.LiveCount() == 1
	_, err := s.lf.Drain(iid, s.wallNow(), deadline, lastLive, func() (vllm.Identity, error) {
		return s.probes.Identity(req.Context(), iid)
	})
	s.publishLive()
	s.afterLifecycle()
	s.lifecycleReply(w, lifecycleStatus(err), errText(err))
}

// ServeReadmit is POST /narwhal/lifecycle/readmit: one engine, or the
// whole wave under a whole-wave hold.
func (s *Supervisor) ServeReadmit(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	var wave struct {
		Wave bool `json:"wave"`
	}
	if json.Unmarshal(body, &wave) == nil && wave.Wave {
		s.readmitWave(w)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	iid, _, ok := s.parseLifecycle(w, req)
	if !ok {
		return
	}
	_, err := s.lf.Readmit(iid, s.wallNow(), s.gates)
	s.publishLive()
	s.afterLifecycle()
	if err == nil {
		s.journalEvent(journal.EngineReadmitted(s.now(), iid, "lifecycle"))
		s.metrics.Readmission(iid, "lifecycle")
	}
	s.lifecycleReply(w, lifecycleStatus(err), errText(err))
}

// ServeLifecycle is GET /narwhal/lifecycle.
func (s *Supervisor) ServeLifecycle(w http.ResponseWriter, _ *http.Request) {
	s.lifecycleReply(w, 200, "")
}

func lifecycleStatus(err error) int {
	var c *lifecycle.Conflict
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &c):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// afterLifecycle journals new lifecycle events, refreshes the lifecycle
// gauges and signals the handoff document.
func (s *Supervisor) afterLifecycle() {
	s.flushLifecycleEvents()
	s.publishHolds("lifecycle") // a readmission lifts the engine's holds
	s.lifecycleGauges()
	s.changed()
}

func (s *Supervisor) lifecycleGauges() {
	for _, rec := range s.lf.Records() {
		s.metrics.SetLifecycleState(rec.IID, string(rec.State))
	}
}

func (s *Supervisor) lifecycleEvent(action string, fields map[string]any) {
	s.lf.step(lifecycle.Note{At: s.wallNow(), Action: action, Fields: fields})
	s.flushLifecycleEvents()
}

func (s *Supervisor) lifecycleReply(w http.ResponseWriter, status int, errMsg string) {
	doc := s.LifecycleDoc()
	doc.Error = errMsg
	s.reply(w, status, doc)
}

// LifecycleDoc is the narwhal.lifecycle v1 document.
func (s *Supervisor) LifecycleDoc() routerdoc.LifecycleDoc {
	snap := s.core.Snapshot()
	resident := map[string]routerdoc.PhasePair[int]{}
	for _, e := range snap.Engines {
		resident[e.IID] = routerdoc.PhasePair[int]{Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
	}
	held := map[string][]lifecycle.Hold{}
	for _, h := range s.lf.Holds() {
		held[h.IID] = append(held[h.IID], h)
	}
	engines := map[string]routerdoc.LifecycleEngine{}
	for _, rec := range s.lf.Records() {
		engines[rec.IID] = routerdoc.LifecycleEngine{
			State: rec.State, Draining: rec.State != lifecycle.Active, AcceptsNew: s.Usable(rec.IID),
			ReadyToStop: rec.State == lifecycle.Drained && rec.OldProcessStart != nil,
			Resident:    resident[rec.IID],
			RequestedAt: rec.RequestedAt, DeadlineAt: rec.DeadlineAt, RestartRequired: rec.RestartRequired,
			WaveID: rec.WaveID, OldProcessStart: rec.OldProcessStart, NewProcessStart: rec.NewProcessStart,
			Checks: rec.Checks, Error: rec.Error, Held: nonNilHolds(held[rec.IID]),
		}
	}
	events := []routerdoc.LifecycleEvent{}
	for _, ev := range s.lf.Events() {
		events = append(events, routerdoc.LifecycleEvent(ev))
	}
	blocked := s.WaveBlocked()
	return routerdoc.LifecycleDoc{
		Schema: routerdoc.LifecycleSchema, SchemaVersion: routerdoc.LifecycleSchemaVersion,
		Router:              routerdoc.LifecycleRouter{ControlsFleet: s.status.ControlsFleet(), Ready: s.status.Ready()},
		Wave:                routerdoc.LifecycleWave{ID: "", Active: blocked != "", ReadyToStop: false},
		LifecycleBlocked:    blocked,
		Engines:             engines,
		Events:              events,
		EngineRestartPolicy: s.cfg.Recovery.EngineRestartPolicy,
		ProcessStarts:       s.lf.ProcessStarts(),
	}
}

func nonNilHolds(h []lifecycle.Hold) []lifecycle.Hold {
	if h == nil {
		return []lifecycle.Hold{}
	}
	return h
}
