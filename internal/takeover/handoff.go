package takeover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Router is the router as its HA side sees it. Snapshot, Apply and
// AddLate take the router's lock themselves; this package never calls
// them, nor any other method, with a lock of its own held.
type Router interface {
	// Now is the router's monotonic time in seconds: the scheduling
	// core's and the journal's scale.
	Now() float64
	// Snapshot reads the router's roles and counters at one instant.
	Snapshot() Snapshot
	// Apply restores a handoff's roles and counters, then re-syncs
	// liveness with the restored lifecycle and starts Hold when set.
	Apply(Restored)
	// AddLate adds the old run's outcomes its handoff had not counted.
	AddLate(Late)
	// SLOMet is the router's SLO rule applied to a journalled row.
	SLOMet(*journal.RequestRow) bool
	// Background runs f until it returns or the router closes.
	Background(f func(ctx context.Context))
	// Identify records every engine's process identity (after a takeover).
	Identify(ctx context.Context)
}

// Lifecycle is the engines' lifecycle as the handoff records and
// restores it; *lifecycle.Manager is one.
type Lifecycle interface {
	Ejected() map[string]string
	Suspect(iid string) bool
	ProcessStarts() map[string]float64
	Records() []lifecycle.Record
	Events() []lifecycle.Event
	Restore(records []lifecycle.Record, ejected map[string]string, starts map[string]float64)
	RestoreEvents(ev []lifecycle.Event)
}

// Snapshot is the router's state the handoff records, read under the
// router's lock.
type Snapshot struct {
	At       float64        // Router.Now when read: the document's run_at
	Roles    []EngineRole   // every engine, in the core's order
	Counters state.Counters // outcome counters and the unserved count
	// Reasons is terminal → reason → n for failed, refused, rejected and
	// expired.
	Reasons map[string]map[string]int
}

// EngineRole is one engine's current role.
type EngineRole struct {
	IID  string
	Role fleet.Role
}

// Restored is what a handoff gives back to the router.
type Restored struct {
	Roles    map[string]fleet.Role // saved roles of the engines that are not pinned
	Counters state.Counters
	Reasons  map[string]map[string]int // terminal → reason → n
	// EventsRestored: the document's lifecycle events were restored; they
	// are in the old run's journal already.
	EventsRestored bool
	// Hold is why the whole wave is held (ejected engines came back with
	// the document), or "".
	Hold string
}

// Handoff builds the narwhal.handoff v1 document from the router's state:
// roles, ejections, counters, lifecycle records and accepted process
// starts — what a restarted router or a standby needs to carry on.
func (h *HA) Handoff() *state.Handoff {
	snap := h.rt.Snapshot()
	c := h.cfg
	doc := &state.Handoff{Schema: state.HandoffSchema, SchemaVersion: state.HandoffSchemaVersion,
		At: wallSeconds(c), Model: c.Fleet.Model, Roles: map[string]fleet.Role{}, InferenceSources: map[string][]string{}}
	if c.Journal != nil {
		runAt := snap.At
		doc.Run, doc.RunAt = c.Journal.Run(), &runAt
	}
	if l := c.Lease; l != nil && l.Valid() {
		doc.Epoch, doc.Holder = l.Epoch(), l.Holder()
	}
	for _, e := range snap.Roles {
		doc.Engines = append(doc.Engines, e.IID)
		doc.Roles[e.IID] = e.Role
	}
	for iid := range c.Life.Ejected() {
		doc.Ejected = append(doc.Ejected, iid)
		if c.Life.Suspect(iid) {
			doc.InferenceSources[iid] = []string{""}
		}
	}
	sort.Strings(doc.Ejected)
	doc.Counters = snap.Counters
	r := snap.Reasons
	doc.OutcomeReasons = state.OutcomeReasons{Failed: to64(r["failed"]), Refused: to64(r["refused"]),
		Rejected: to64(r["rejected"]), Expired: to64(r["expired"])}
	doc.Lifecycle = &state.Lifecycle{EngineRestartPolicy: c.Fleet.Recovery.EngineRestartPolicy, ProcessStarts: c.Life.ProcessStarts()}
	for _, rec := range c.Life.Records() {
		doc.Lifecycle.Records = append(doc.Lifecycle.Records, toDrainRecord(rec))
	}
	for _, ev := range c.Life.Events() {
		doc.Lifecycle.Events = append(doc.Lifecycle.Events, routerdoc.LifecycleEvent(ev).Row())
	}
	return doc
}

// wallSeconds is the clock's wall time in Unix seconds, to the
// microsecond, as the document's at.
func wallSeconds(c Config) float64 { return float64(c.Clock.Now().UnixMicro()) / 1e6 }

// Resume applies the handoff at StatePath. A missing file is a cold
// start; a damaged or newer one is an error the operator must see; a
// document for another engine set or policy starts from the configured
// split with a warning. A standby never resumes: it takes its document
// from the primary.
func (h *HA) Resume() error {
	c := h.cfg
	if c.StandbyOf != "" {
		return nil
	}
	doc, err := state.Read(c.StatePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Log.Info("no handoff document to resume from: cold start with the configured roles", "path", c.StatePath)
		return nil
	case err != nil:
		return err
	}
	contracted := c.Fleet.EngineContract != nil
	if err := state.ResumeCheck(doc, c.Engines, c.Fleet.Recovery.EngineRestartPolicy, contracted); err != nil {
		if _, ok := state.IsResumeError(err); ok && !contracted {
			c.Log.Warn("the handoff document does not match this fleet: starting from the configured roles", "path", c.StatePath, "err", err)
			return nil
		}
		return fmt.Errorf("resume from %s: %w", c.StatePath, err)
	}
	h.apply(doc)
	h.closeLost(doc, 0) // the old process is gone: its unfinished requests are lost
	c.Log.Info("resumed from the handoff document", "path", c.StatePath, "run", doc.Run, "ejected", doc.Ejected)
	return nil
}

// adopt applies the handoff document another router wrote while this one
// was fenced (it names another run), and closes what that router left
// open, as a standby's takeover does: a router that claims the lease
// again after a failover carries on from its successor's state, not from
// its own stale view. The other router may be fenced rather than dead,
// so its requests are closed once past their deadline.
func (h *HA) adopt() {
	c := h.cfg
	if c.StatePath == "" || c.Journal == nil {
		return
	}
	doc, err := state.Read(c.StatePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		c.Log.Warn("cannot read the handoff document after claiming the lease; carrying on from this router's own state",
			"path", c.StatePath, "err", err)
		return
	case doc.Run == "" || doc.Run == c.Journal.Run():
		return
	}
	if err := state.ResumeCheck(doc, c.Engines, c.Fleet.Recovery.EngineRestartPolicy, c.Fleet.EngineContract != nil); err != nil {
		c.Log.Warn("the handoff document of the router that held the lease does not match this fleet; not adopted",
			"path", c.StatePath, "run", doc.Run, "err", err)
		return
	}
	h.apply(doc)
	h.closeLost(doc, units.Seconds(c.Fleet.Serving.RequestTimeoutS)+time.Second)
	c.Log.Info("adopted the handoff of the router that held the lease meanwhile", "path", c.StatePath, "run", doc.Run)
}

// apply restores a handoff: roles (pinned engines keep their configured
// role), ejections (probed at once), lifecycle records, events and
// process starts, and the outcome counters. Everything else starts fresh.
func (h *HA) apply(doc *state.Handoff) {
	pinned := map[string]bool{}
	for _, e := range h.cfg.Fleet.Engines {
		pinned[e.IID] = e.Pin
	}
	out := Restored{Roles: map[string]fleet.Role{}, Counters: doc.Counters, Reasons: map[string]map[string]int{
		"failed": from64(doc.OutcomeReasons.Failed), "refused": from64(doc.OutcomeReasons.Refused),
		"rejected": from64(doc.OutcomeReasons.Rejected), "expired": from64(doc.OutcomeReasons.Expired)}}
	for iid, role := range doc.Roles {
		if !pinned[iid] {
			out.Roles[iid] = role
		}
	}
	h.cfg.Metrics.Restore(restoredMetrics(doc))
	out.EventsRestored = h.restoreLifecycle(doc)
	if len(doc.Ejected) > 0 {
		out.Hold = "resumed with ejected engines " + strings.Join(doc.Ejected, ", ")
	}
	h.rt.Apply(out)
}

func restoredMetrics(doc *state.Handoff) metrics.Outcomes {
	c, r := doc.Counters, doc.OutcomeReasons
	return metrics.Outcomes{Offered: float64(c.Offered), UnsizedOffered: float64(c.UnsizedOffered),
		Served: float64(c.Served), SLOMet: float64(c.SLOMet), Cancelled: float64(c.Cancelled),
		Invalid: float64(c.InvalidRequests), Unserved: float64(c.Unserved),
		Failed: toFloat(r.Failed), Refused: toFloat(r.Refused), Rejected: toFloat(r.Rejected), Expired: toFloat(r.Expired)}
}

// restoreLifecycle gives the lifecycle its saved records, ejections,
// process starts and events, and says whether events were restored.
func (h *HA) restoreLifecycle(doc *state.Handoff) bool {
	ejected := map[string]string{}
	for _, iid := range doc.Ejected {
		ejected[iid] = "restored"
	}
	var records []lifecycle.Record
	var starts map[string]float64
	l := doc.Lifecycle
	if l != nil {
		for _, d := range l.Records {
			records = append(records, fromDrainRecord(d))
		}
		starts = l.ProcessStarts
		evs := make([]lifecycle.Event, 0, len(l.Events))
		for _, row := range l.Events {
			evs = append(evs, fromEventRow(row))
		}
		h.cfg.Life.RestoreEvents(evs)
	}
	h.cfg.Life.Restore(records, ejected, starts)
	return l != nil
}

// fromEventRow is the inverse of routerdoc.LifecycleEvent.Row: at and
// action, and every other key a field.
func fromEventRow(row map[string]any) lifecycle.Event {
	at, _ := row["at"].(float64)
	action, _ := row["action"].(string)
	fields := map[string]any{}
	for k, v := range row {
		if k != "at" && k != "action" {
			fields[k] = v
		}
	}
	return lifecycle.Event{At: at, Action: action, Fields: fields}
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

// write saves the handoff document to StatePath. Only a router that
// controls the fleet writes it: a fenced router's view is stale. The
// Writer serialises calls and logs failures.
func (h *HA) write() error {
	if h.cfg.StatePath == "" || !h.Controls() {
		return nil
	}
	if err := state.Write(h.cfg.StatePath, h.Handoff()); err != nil {
		return err
	}
	h.named.Store(true)
	return nil
}

// WriteHandoff writes the document now and returns what went wrong, for
// callers off the request path (the monitor pass, shutdown, takeover).
func (h *HA) WriteHandoff() error { return h.writer.Flush() }

// Changed asks for the document to be written soon, without waiting:
// what the request path calls after a change the document records.
func (h *HA) Changed() { h.writer.Changed() }

func to64(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
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
