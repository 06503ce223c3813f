package router

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// wallNow is wall-clock Unix seconds, for lifecycle records and events.
func (r *Router) wallNow() float64 { return float64(r.clock.Now().UnixMicro()) / 1e6 }

// IsLoopback reports whether host binds only the loopback interface: the
// one case where lifecycle actions are allowed without an admin token.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// admin guards the lifecycle actions: a same-site request (originRefusal),
// the bearer token when one is configured (without one, only a router
// bound to loopback accepts them), and a JSON body (mediaRefusal).
func (r *Router) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		open := r.adminToken == ""
		if open && !r.adminOpen {
			adminError(http.StatusForbidden, "admin_disabled", "lifecycle actions are disabled: start narwhal-serve with --admin-token-env NAME, or bind it to loopback").write(w)
			return
		}
		if e := originRefusal(req, open); e != nil {
			e.write(w)
			return
		}
		if !open && subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte("Bearer "+r.adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			adminError(http.StatusUnauthorized, "invalid_admin_token", "lifecycle actions need the admin token: send -H 'Authorization: Bearer TOKEN' with the token (the value of the variable --admin-token-env names; make run prints it)").write(w)
			return
		}
		if e := mediaRefusal(req); e != nil {
			e.write(w)
			return
		}
		h(w, req)
	}
}

// lifecycleRequest is the body of drain and readmit.
type lifecycleRequest struct {
	IID       string   `json:"iid"`
	Engines   []string `json:"engines"`
	Wave      bool     `json:"wave"`
	DeadlineS *float64 `json:"deadline_s"`
}

func (r *Router) parseLifecycle(w http.ResponseWriter, req *http.Request) (string, *lifecycleRequest, bool) {
	var lr lifecycleRequest
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	if err := json.Unmarshal(body, &lr); err != nil {
		r.lifecycleReply(w, http.StatusBadRequest, "request body must be JSON: {\"iid\": \"<engine>\"}")
		return "", nil, false
	}
	if lr.Wave {
		r.lifecycleReply(w, http.StatusConflict, "whole-wave drains are not supported by this build: drain engines one at a time; under a whole-wave hold, restart every engine and POST readmit {\"wave\": true}")
		return "", nil, false
	}
	iids := lr.Engines
	if lr.IID != "" {
		iids = append(iids, lr.IID)
	}
	if len(iids) != 1 {
		r.lifecycleReply(w, http.StatusConflict, "name exactly one engine: {\"iid\": \"<engine>\"}")
		return "", nil, false
	}
	return iids[0], &lr, true
}

func (r *Router) serveDrain(w http.ResponseWriter, req *http.Request) {
	iid, lr, ok := r.parseLifecycle(w, req)
	if !ok {
		return
	}
	deadline := 300.0
	if lr.DeadlineS != nil {
		deadline = *lr.DeadlineS
	}
	lastLive := r.life.Live(iid) && r.liveCount() == 1
	_, err := r.life.Drain(iid, r.wallNow(), deadline, lastLive, func() (lifecycle.Identity, error) {
		return r.identity(req.Context(), iid)
	})
	r.syncLive()
	r.afterLifecycle()
	r.lifecycleReply(w, lifecycleStatus(err), errText(err))
}

func (r *Router) serveReadmit(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	var wave struct {
		Wave bool `json:"wave"`
	}
	if json.Unmarshal(body, &wave) == nil && wave.Wave {
		r.readmitWave(w)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	iid, _, ok := r.parseLifecycle(w, req)
	if !ok {
		return
	}
	_, err := r.life.Readmit(iid, r.wallNow(), r.gates)
	r.syncLive()
	r.afterLifecycle()
	if err == nil {
		r.journalEvent(journal.EngineReadmitted(r.now(), iid, "lifecycle"))
		r.metrics.Readmission(iid, "lifecycle")
	}
	r.lifecycleReply(w, lifecycleStatus(err), errText(err))
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

func (r *Router) liveCount() int {
	n := 0
	for _, iid := range r.order {
		if r.life.Live(iid) {
			n++
		}
	}
	return n
}

// afterLifecycle journals new lifecycle events, refreshes the lifecycle
// gauges and writes the handoff.
func (r *Router) afterLifecycle() {
	r.flushLifecycleEvents()
	r.publishHolds("lifecycle") // a readmission lifts the engine's holds
	for _, rec := range r.life.Records() {
		r.metrics.SetLifecycleState(rec.IID, string(rec.State))
	}
	r.stateChanged()
}

func (r *Router) lifecycleEvent(action string, fields map[string]any) {
	r.life.Note(r.wallNow(), action, fields)
	r.flushLifecycleEvents()
}

// flushLifecycleEvents writes the engine_lifecycle events not yet in the
// journal.
func (r *Router) flushLifecycleEvents() {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	evs, next := r.life.TakeEvents(r.evSeen)
	r.evSeen = next
	for _, ev := range evs {
		r.journalEvent(journal.EngineLifecycle(time.UnixMicro(int64(ev.At*1e6)), ev.Action, ev.Fields))
	}
}

func (r *Router) lifecycleReply(w http.ResponseWriter, status int, errMsg string) {
	doc := r.lifecycleDoc()
	doc.Error = errMsg
	writeJSON(w, status, doc)
}

func (r *Router) serveLifecycle(w http.ResponseWriter, _ *http.Request) { r.lifecycleReply(w, 200, "") }

// lifecycleDoc is the narwhal.lifecycle v1 document.
func (r *Router) lifecycleDoc() routerdoc.LifecycleDoc {
	r.mu.Lock()
	snap := r.core.Snapshot(r.now())
	r.mu.Unlock()
	resident := map[string]routerdoc.PhasePair[int]{}
	for _, e := range snap.Engines {
		resident[e.IID] = routerdoc.PhasePair[int]{Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
	}
	held := map[string][]lifecycle.Hold{}
	for _, h := range r.life.Holds() {
		held[h.IID] = append(held[h.IID], h)
	}
	engines := map[string]routerdoc.LifecycleEngine{}
	for _, rec := range r.life.Records() {
		engines[rec.IID] = routerdoc.LifecycleEngine{
			State: rec.State, Draining: rec.State != lifecycle.Active, AcceptsNew: r.life.Live(rec.IID),
			ReadyToStop: rec.State == lifecycle.Drained && rec.OldProcessStart != nil,
			Resident:    resident[rec.IID],
			RequestedAt: rec.RequestedAt, DeadlineAt: rec.DeadlineAt, RestartRequired: rec.RestartRequired,
			WaveID: rec.WaveID, OldProcessStart: rec.OldProcessStart, NewProcessStart: rec.NewProcessStart,
			Checks: rec.Checks, Error: rec.Error, Held: nonNilHolds(held[rec.IID]),
		}
	}
	events := []routerdoc.LifecycleEvent{}
	for _, ev := range r.life.Events() {
		events = append(events, routerdoc.LifecycleEvent(ev))
	}
	blocked := r.waveBlocked()
	return routerdoc.LifecycleDoc{
		Schema: routerdoc.LifecycleSchema, SchemaVersion: routerdoc.LifecycleSchemaVersion,
		Router:              routerdoc.LifecycleRouter{ControlsFleet: r.controlsFleet(), Ready: r.ready()},
		Wave:                routerdoc.LifecycleWave{ID: "", Active: blocked != "", ReadyToStop: false},
		LifecycleBlocked:    blocked,
		Engines:             engines,
		Events:              events,
		EngineRestartPolicy: r.cfg.Recovery.EngineRestartPolicy,
		ProcessStarts:       r.life.ProcessStarts(),
	}
}

// gates are the readmission gates (runtime.md §3.5.3), run before the
// engine is placed again. old is the identity recorded before the drain;
// requireNewer demands a newer process (a planned restart). A failed
// identity gate (attestation, model, process identity with the fleet's
// build) ends validation before the generation probe and the KV
// transfer: an engine that has not proved what it is never moves KV.
func (r *Router) gates(iid string, old *lifecycle.Identity, requireNewer bool) ([]lifecycle.Check, lifecycle.Identity) {
	ctx, cancel := context.WithTimeout(r.bgCtx, 4*r.probeTimeout()+units.Seconds(r.cfg.Engine.FirstTokenTimeoutS))
	defer cancel()
	var checks []lifecycle.Check
	add := func(name string, e error, okDetail string) bool {
		c := lifecycle.Check{Name: name, OK: e == nil, Detail: okDetail}
		if e != nil {
			c.Detail = e.Error()
		}
		checks = append(checks, c)
		return e == nil
	}
	if !add("health", asErr(r.healthProbe(ctx, iid)), "GET /health 200 and the credential accepted") {
		return checks, lifecycle.Identity{}
	}
	// The identity gates only read; all run, so every mismatch shows at
	// once. Nothing runs on the engine and no KV moves until they pass.
	attested := add("attestation", r.attestationGate(ctx, iid), "attested contract and process")
	modelOK := add("model", r.modelGate(ctx, iid), r.cfg.Model)
	id, err := r.identity(ctx, iid)
	if err == nil {
		r.observeIdentity(iid, id) // a build hold lifts (or starts) on what validation saw
	}
	if b := r.life.Build(); err == nil && b != "" && id.Version != b {
		err = fmt.Errorf("vLLM %s is not the fleet's build %s: restart the engine with vLLM %s", id.Version, b, b)
	}
	if err == nil && requireNewer && old != nil && !(id.ProcessStart > old.ProcessStart) {
		err = fmt.Errorf("process start %.3f is not newer than the drained process's %.3f: restart the engine before readmitting it", id.ProcessStart, old.ProcessStart)
	}
	identified := add("process_identity", err, fmt.Sprintf("vLLM %s, process start %.3f", id.Version, id.ProcessStart))
	profiled := identified && add("profile_generation", r.profileGenerationGate(ctx, iid, id), "the loaded profile was measured on this process")
	if !attested || !modelOK || !profiled {
		return checks, id
	}
	add("generation", asErr(r.inferenceProbe(ctx, iid)), "a direct completion")
	add("kv_transfer", r.transferGate(ctx, iid), "")
	add("final_health", asErr(r.healthProbe(ctx, iid)), "GET /health 200")
	return checks, id
}

// asErr keeps a nil *vllm.Error from becoming a non-nil error.
func asErr(e *vllm.Error) error {
	if e == nil {
		return nil
	}
	return e
}

func (r *Router) modelGate(ctx context.Context, iid string) error {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	models, e := r.engines[iid].client.Models(ctx)
	if e != nil {
		return e
	}
	if !slices.Contains(models, r.cfg.Model) {
		return fmt.Errorf("the engine serves %v, not the fleet's model %q", models, r.cfg.Model)
	}
	return nil
}

// attestationGate verifies the engine's sidecar: the attested contract
// must be the fleet's and its process identity the live one (a sidecar
// answers 503 once its engine process changed). The gates run only on
// contracted fleets, so a missing attestation_url fails: an engine
// without a sidecar cannot prove its build.
func (r *Router) attestationGate(ctx context.Context, iid string) error {
	url := r.attestURL[iid]
	if url == "" {
		return fmt.Errorf("attestation_url is not configured for %s: engine_contract needs a narwhal-attest sidecar beside every engine (set engines[%d].attestation_url)", iid, r.engineIndex(iid))
	}
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	body, err := attest.Fetch(ctx, http.DefaultClient, url)
	if err != nil {
		return fmt.Errorf("attestation sidecar: %w (after an engine restart, restart its sidecar too)", err)
	}
	live, err := r.identity(ctx, iid)
	if err != nil {
		return err
	}
	if _, fails := attest.Verify(body, r.cfg.EngineContract, vllm.Identity{Version: live.Version, ProcessStart: live.ProcessStart}); len(fails) > 0 {
		return fmt.Errorf("attestation: %s", strings.Join(fails, "; "))
	}
	return nil
}

// engineIndex is iid's position in the fleet's engines list, for field
// paths.
func (r *Router) engineIndex(iid string) int {
	return slices.IndexFunc(r.cfg.Engines, func(e fleet.Engine) bool { return e.IID == iid })
}

// transferGate moves KV from the candidate to a live peer: a prefill leg
// there and a decode leg on the peer must produce tokens.
func (r *Router) transferGate(ctx context.Context, iid string) error {
	peer := ""
	for _, p := range r.order {
		if p != iid && r.life.Live(p) {
			peer = p
			break
		}
	}
	if peer == "" {
		return nil // no live peer to transfer with: nothing to prove here
	}
	body, _ := vllm.ParseBody([]byte(`{"prompt":"narwhal transfer probe","max_tokens":2}`))
	h, e := r.engines[iid].client.Prefill(ctx, "/v1/completions", vllm.PrefillBody(body, r.cfg.Model), "narwhal-probe-"+r.ids.NewID()+"-prefill")
	if e != nil {
		return e
	}
	s, e := r.engines[peer].client.OpenStream(ctx, "/v1/completions", vllm.DecodeBody(body, r.cfg.Model, h.Params), "narwhal-probe-"+r.ids.NewID()+"-decode")
	if e != nil {
		return fmt.Errorf("decode on %s with %s's KV: %w", peer, iid, e)
	}
	defer s.Close()
	tokens := 0
	for {
		ev, e := s.Next()
		if e != nil {
			return fmt.Errorf("decode on %s with %s's KV: %w", peer, iid, e)
		}
		tokens += ev.Tokens
		if ev.Done {
			break
		}
	}
	if tokens == 0 {
		return fmt.Errorf("decode on %s with %s's KV produced no tokens", peer, iid)
	}
	return nil
}

func nonNilHolds(h []lifecycle.Hold) []lifecycle.Hold {
	if h == nil {
		return []lifecycle.Hold{}
	}
	return h
}
