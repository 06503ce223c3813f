package router

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/state"
)

// handoff builds the narwhal.handoff v1 document from the router's state:
// roles, ejections, counters, lifecycle records and accepted process
// starts — what a restarted router or a standby needs to carry on.
func (r *Router) handoff() *state.Handoff {
	r.mu.Lock()
	runAt := r.now()
	snap := r.core.Snapshot(runAt)
	st := r.stats
	reasons := outcomeReasons(st.reasons)
	r.mu.Unlock()
	h := &state.Handoff{Schema: state.HandoffSchema, SchemaVersion: state.HandoffSchemaVersion,
		At: r.wallNow(), Model: r.cfg.Model, Roles: map[string]string{}, InferenceSources: map[string][]string{}}
	if r.journal != nil {
		h.Run, h.RunAt = r.journal.Run(), &runAt
	}
	if l := r.lease; l != nil && l.Valid() {
		h.Epoch, h.Holder = l.Epoch(), l.Holder()
	}
	for _, e := range snap.Engines {
		h.Engines = append(h.Engines, e.IID)
		h.Roles[e.IID] = string(e.Role)
	}
	for iid := range r.life.Ejected() {
		h.Ejected = append(h.Ejected, iid)
		if r.life.Suspect(iid) {
			h.InferenceSources[iid] = []string{""}
		}
	}
	sort.Strings(h.Ejected)
	h.Counters = state.Counters{Offered: int64(st.offered), UnsizedOffered: int64(st.unsizedOffered), Served: int64(st.served),
		SLOMet: int64(st.sloMet), Expired: int64(st.expired), InvalidRequests: int64(st.invalid), Failed: int64(st.failed),
		Refused: int64(st.refused), Rejected: int64(st.rejected), Cancelled: int64(st.cancelled), Unserved: int64(snap.Unserved)}
	h.OutcomeReasons = state.OutcomeReasons{Failed: to64(reasons["failed"]), Refused: to64(reasons["refused"]),
		Rejected: to64(reasons["rejected"]), Expired: to64(reasons["expired"])}
	h.Lifecycle = &state.Lifecycle{EngineRestartPolicy: r.cfg.Recovery.EngineRestartPolicy, ProcessStarts: r.life.ProcessStarts()}
	for _, rec := range r.life.Records() {
		h.Lifecycle.Records = append(h.Lifecycle.Records, toDrainRecord(rec))
	}
	for _, ev := range r.life.Events() {
		h.Lifecycle.Events = append(h.Lifecycle.Events, routerdoc.LifecycleEvent(ev).Row())
	}
	return h
}

func to64(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

func toDrainRecord(r lifecycle.Record) state.DrainRecord {
	d := state.DrainRecord{IID: r.IID, State: string(r.State), DeadlineAt: r.DeadlineAt, RestartRequired: r.RestartRequired,
		WaveID: r.WaveID, OldProcessStart: r.OldProcessStart, NewProcessStart: r.NewProcessStart, Error: r.Error}
	if r.RequestedAt != nil {
		d.RequestedAt = *r.RequestedAt
	}
	for _, c := range r.Checks {
		d.Checks = append(d.Checks, state.Check{Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	return d
}

func fromDrainRecord(d state.DrainRecord) lifecycle.Record {
	r := lifecycle.Record{IID: d.IID, State: lifecycle.State(d.State), DeadlineAt: d.DeadlineAt, RestartRequired: d.RestartRequired,
		WaveID: d.WaveID, OldProcessStart: d.OldProcessStart, NewProcessStart: d.NewProcessStart, Error: d.Error, Checks: []lifecycle.Check{}}
	if d.RequestedAt > 0 {
		at := d.RequestedAt
		r.RequestedAt = &at
	}
	for _, c := range d.Checks {
		r.Checks = append(r.Checks, lifecycle.Check{Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	return r
}

// writeHandoff saves the handoff document to recovery.state_path. Only a
// router that controls the fleet writes it: a fenced router's view is
// stale.
func (r *Router) writeHandoff() error {
	r.handoffMu.Lock()
	defer r.handoffMu.Unlock()
	if r.statePath == "" || !r.controlsFleet() {
		return nil
	}
	if err := state.Write(r.statePath, r.handoff()); err != nil {
		r.log.Error("writing the handoff document failed; a restarted router would resume from an older one", "path", r.statePath, "err", err)
		return err
	}
	return nil
}

func (r *Router) serveHandoff(w http.ResponseWriter, _ *http.Request) {
	b, err := state.Encode(r.handoff())
	if err != nil {
		serverError(http.StatusInternalServerError, "handoff", "handoff document: "+err.Error()).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// resume applies the handoff at recovery.state_path. A missing file is a
// cold start; a damaged or newer one is an error the operator must see;
// a document for another engine set or policy starts from the configured
// split with a warning.
func (r *Router) resume() error {
	h, err := state.Read(r.statePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.log.Info("no handoff document to resume from: cold start with the configured roles", "path", r.statePath)
		return nil
	case err != nil:
		return err
	}
	if err := state.ResumeCheck(h, r.order, r.cfg.Recovery.EngineRestartPolicy, r.cfg.EngineContract != nil); err != nil {
		if _, ok := state.IsResumeError(err); ok && r.cfg.EngineContract == nil {
			r.log.Warn("the handoff document does not match this fleet: starting from the configured roles", "path", r.statePath, "err", err)
			return nil
		}
		return fmt.Errorf("resume from %s: %w", r.statePath, err)
	}
	r.apply(h)
	r.closeLost(h, 0) // the old process is gone: its unfinished requests are lost
	r.log.Info("resumed from the handoff document", "path", r.statePath, "run", h.Run, "ejected", h.Ejected)
	return nil
}

// apply restores a handoff: roles (pinned engines keep their configured
// role), ejections (probed at once), lifecycle records and process starts,
// and the outcome counters. Everything else starts fresh.
func (r *Router) apply(h *state.Handoff) {
	pinned := map[string]bool{}
	for _, e := range r.cfg.Engines {
		pinned[e.IID] = e.Pin
	}
	r.mu.Lock()
	for iid, role := range h.Roles {
		if !pinned[iid] {
			r.core.SetRole(iid, fleet.Role(role))
		}
	}
	c := h.Counters
	r.stats.offered, r.stats.unsizedOffered, r.stats.served, r.stats.sloMet = int(c.Offered), int(c.UnsizedOffered), int(c.Served), int(c.SLOMet)
	r.stats.expired, r.stats.invalid, r.stats.failed = int(c.Expired), int(c.InvalidRequests), int(c.Failed)
	r.stats.refused, r.stats.rejected, r.stats.cancelled = int(c.Refused), int(c.Rejected), int(c.Cancelled)
	r.stats.reasons = map[string]map[string]int{"failed": from64(h.OutcomeReasons.Failed), "refused": from64(h.OutcomeReasons.Refused),
		"rejected": from64(h.OutcomeReasons.Rejected), "expired": from64(h.OutcomeReasons.Expired)}
	r.mu.Unlock()
	r.metrics.Restore(metrics.Outcomes{Offered: float64(c.Offered), UnsizedOffered: float64(c.UnsizedOffered),
		Served: float64(c.Served), SLOMet: float64(c.SLOMet), Cancelled: float64(c.Cancelled),
		Invalid: float64(c.InvalidRequests), Unserved: float64(c.Unserved),
		Failed: toFloat(h.OutcomeReasons.Failed), Refused: toFloat(h.OutcomeReasons.Refused),
		Rejected: toFloat(h.OutcomeReasons.Rejected), Expired: toFloat(h.OutcomeReasons.Expired)})
	ejected := map[string]string{}
	for _, iid := range h.Ejected {
		ejected[iid] = "restored"
	}
	var records []lifecycle.Record
	var starts map[string]float64
	if l := h.Lifecycle; l != nil {
		for _, d := range l.Records {
			records = append(records, fromDrainRecord(d))
		}
		starts = l.ProcessStarts
		var evs []lifecycle.Event
		for _, row := range l.Events {
			at, _ := row["at"].(float64)
			action, _ := row["action"].(string)
			fields := map[string]any{}
			for k, v := range row {
				if k != "at" && k != "action" {
					fields[k] = v
				}
			}
			evs = append(evs, lifecycle.Event{At: at, Action: action, Fields: fields})
		}
		r.av.RestoreEvents(evs) // restored events are already in the old journal
	}
	r.av.Restore(records, ejected, starts)
	if len(h.Ejected) > 0 {
		r.av.HoldWave("resumed with ejected engines " + strings.Join(h.Ejected, ", "))
	}
}

func from64(m map[string]int64) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

func toFloat(m map[string]int64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}
