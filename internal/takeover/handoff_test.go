package takeover

import (
	"reflect"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/state"
)

func testSnapshot() Snapshot {
	return Snapshot{At: 12.5,
		Roles:    []EngineRole{{"d0", fleet.Decode}, {"p0", fleet.Prefill}, {"p1", fleet.Decode}},
		Counters: state.Counters{Offered: 9, Served: 6, SLOMet: 5, Failed: 2, Refused: 1, Unserved: 3},
		Reasons: map[string]map[string]int{"failed": {"engine_error": 2}, "refused": {"queue": 1},
			"rejected": {}, "expired": {}}}
}

// The document carries the snapshot's roles and counters and the
// lifecycle's ejections, suspects, records and events.
func TestHandoffRecordsTheRouterAndTheLifecycle(t *testing.T) {
	rt := newFakeRouter(t)
	rt.snap = testSnapshot()
	h := newTestHA(t, rt, nil)
	life := h.cfg.Life.(*lifecycle.Manager)
	life.Eject("d0", "probe")
	life.Note(3, "process_excluded", map[string]any{"iid": "p1"})
	doc := h.Handoff()
	if err := doc.Validate(h.cfg.Engines, h.cfg.Fleet.Recovery.EngineRestartPolicy); err != nil {
		t.Fatalf("the built document does not validate: %v", err)
	}
	wantRoles := map[string]fleet.Role{"d0": fleet.Decode, "p0": fleet.Prefill, "p1": fleet.Decode}
	if !reflect.DeepEqual(doc.Engines, []string{"d0", "p0", "p1"}) || !reflect.DeepEqual(doc.Roles, wantRoles) {
		t.Errorf("engines %v roles %v, want the snapshot's", doc.Engines, doc.Roles)
	}
	if doc.Counters != rt.snap.Counters || doc.OutcomeReasons.Failed["engine_error"] != 2 || doc.OutcomeReasons.Refused["queue"] != 1 {
		t.Errorf("counters %+v reasons %+v, want the snapshot's", doc.Counters, doc.OutcomeReasons)
	}
	if !reflect.DeepEqual(doc.Ejected, []string{"d0"}) || doc.Run != "" || doc.RunAt != nil || doc.Epoch != 0 {
		t.Errorf("ejected %v run %q run_at %v epoch %d; want d0 ejected and no journal or lease fields",
			doc.Ejected, doc.Run, doc.RunAt, doc.Epoch)
	}
	lc := doc.Lifecycle
	if lc == nil || len(lc.Records) != 3 || len(lc.Events) == 0 || lc.Events[len(lc.Events)-1]["action"] != "process_excluded" {
		t.Fatalf("lifecycle %+v: want three records and the noted event", lc)
	}
}

// Apply gives the router the saved roles of unpinned engines, the
// counters and a wave hold for ejected engines, and restores the
// lifecycle (records, ejections, events) itself.
func TestApplyRestoresRolesButNotPins(t *testing.T) {
	src := newFakeRouter(t)
	src.snap = testSnapshot()
	a := newTestHA(t, src, nil)
	a.cfg.Life.(*lifecycle.Manager).Eject("p1", "probe")
	a.cfg.Life.(*lifecycle.Manager).Note(3, "process_excluded", map[string]any{"iid": "p1"})
	doc := a.Handoff()
	doc.Roles["p0"] = "decode" // p0 is pinned prefill
	dst := newFakeRouter(t)
	b := newTestHA(t, dst, nil)
	b.apply(doc)
	got := dst.lastApplied(t)
	if want := map[string]fleet.Role{"d0": fleet.Decode, "p1": fleet.Decode}; !reflect.DeepEqual(got.Roles, want) {
		t.Errorf("roles applied %v, want %v (pinned p0 left out)", got.Roles, want)
	}
	if got.Counters != src.snap.Counters || got.Reasons["failed"]["engine_error"] != 2 || got.Reasons["refused"]["queue"] != 1 {
		t.Errorf("counters %+v reasons %v, want the document's", got.Counters, got.Reasons)
	}
	if !got.EventsRestored || got.Hold != "resumed with ejected engines p1" {
		t.Errorf("events restored %v, hold %q", got.EventsRestored, got.Hold)
	}
	life := b.cfg.Life.(*lifecycle.Manager)
	if evs := life.Events(); life.Live("p1") || len(evs) != 1 || evs[0].Action != "process_excluded" || evs[0].Fields["iid"] != "p1" {
		t.Errorf("lifecycle not restored: p1 live %v, %d events", life.Live("p1"), len(life.Events()))
	}
}

func TestResumeCases(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
		mod     func(*Config)
		applied bool
		err     string
	}{
		{"missing file is a cold start", nil, nil, false, ""},
		{"saved document is applied", writeDoc(nil), nil, true, ""},
		{"another engine set starts cold", writeDoc(func(d *state.Handoff) { stripEngine(d, "p1") }), nil, false, ""},
		{"another engine set under a contract is an error", writeDoc(func(d *state.Handoff) { stripEngine(d, "p1") }),
			func(c *Config) { c.Fleet.EngineContract = &fleet.EngineContract{} }, false, "resume from "},
		{"a standby does not resume", writeDoc(nil), func(c *Config) { c.StandbyOf = "http://127.0.0.1:1" }, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newFakeRouter(t)
			h := newTestHA(t, rt, func(c *Config) {
				if tc.mod != nil {
					tc.mod(c)
				}
				if c.StandbyOf != "" {
					c.Lease = testLease(t, c.StatePath+".lease", "a", c.Clock, 1)
				}
			})
			if tc.prepare != nil {
				tc.prepare(t, h.cfg.StatePath)
			}
			err := h.Resume()
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Resume: %v, want error containing %q", err, tc.err)
			}
			if applied := len(rt.applied) > 0; applied != tc.applied {
				t.Errorf("applied %v, want %v", applied, tc.applied)
			}
		})
	}
}

// writeDoc saves a valid document for testFleet, adjusted by mod.
func writeDoc(mod func(*state.Handoff)) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		rt := newFakeRouter(t)
		rt.snap = testSnapshot()
		doc := newTestHA(t, rt, nil).Handoff()
		if mod != nil {
			mod(doc)
		}
		if err := state.Write(path, doc); err != nil {
			t.Fatal(err)
		}
	}
}

func stripEngine(d *state.Handoff, iid string) {
	var keep []string
	for _, e := range d.Engines {
		if e != iid {
			keep = append(keep, e)
		}
	}
	d.Engines = keep
	delete(d.Roles, iid)
	var recs []state.DrainRecord
	for _, r := range d.Lifecycle.Records {
		if r.IID != iid {
			recs = append(recs, r)
		}
	}
	d.Lifecycle.Records = recs
}
