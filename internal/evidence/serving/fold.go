package serving

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// group is one endpoint fingerprint's serving in the windows.
type group struct {
	endpoint, version string
	acc               *accumulator        // every request it served, once
	replicas          map[string]*replica // by iid: each engine's own share
}

// replica is one engine's share of its fingerprint's serving.
type replica struct {
	acc          *accumulator
	boot         string
	processStart float64
}

// unplaced is a request never placed on any engine (refused, rejected,
// expired before a leg), with the window it came from.
type unplaced struct {
	w *Window
	r *wrow
}

// folder folds the windows' rows into fingerprint groups.
type folder struct {
	in       Input
	groups   map[string]*group
	unplaced []unplaced
	notes    []string
}

func newFolder(in Input) *folder { return &folder{in: in, groups: map[string]*group{}} }

// window folds one window's rows.
func (f *folder) window(w *Window) {
	w.compact()
	var legs []int16
	var counted []string
	for i := range w.rows {
		r := &w.rows[i]
		if terminals[r.terminal] == journal.TerminalInvalid {
			continue // the client's own mistake is no offer to any engine
		}
		var placed bool
		legs, placed = w.legs(r, legs)
		if !placed {
			f.unplaced = append(f.unplaced, unplaced{w, r})
			continue
		}
		counted = counted[:0]
		run := w.runs[r.run]
		for _, e := range legs {
			b, ok := f.bind(w, r, e)
			if !ok {
				continue
			}
			g := f.group(b)
			if !slices.Contains(counted, b.Endpoint) {
				g.acc.add(run, r, f.in.Request.SLO)
				counted = append(counted, b.Endpoint)
			}
			g.replica(b).acc.add(run, r, f.in.Request.SLO)
		}
	}
}

// bind is the binding of engine e's generation at row r, noting why
// there is none.
func (f *folder) bind(w *Window, r *wrow, e int16) (Binding, bool) {
	b, err := bind(w.gens[e][w.epochs[r.epoch][e]], f.in.Bindings)
	if err != nil {
		f.notes = appendOnce(f.notes, err.Error())
		return Binding{}, false
	}
	return b, true
}

func (f *folder) group(b Binding) *group {
	g := f.groups[b.Endpoint]
	if g == nil {
		g = &group{endpoint: b.Endpoint, version: b.EngineVersion, acc: newAccumulator(), replicas: map[string]*replica{}}
		f.groups[b.Endpoint] = g
	}
	return g
}

func (g *group) replica(b Binding) *replica {
	rp := g.replicas[b.IID]
	if rp == nil {
		rp = &replica{acc: newAccumulator(), boot: b.BootRecord, processStart: b.ProcessStart}
		g.replicas[b.IID] = rp
	}
	return rp
}

// chargeUnplaced counts every never-placed request once in each
// fingerprint that served in the windows. When none served, the fleet's
// bound fingerprints carry them, so a fleet that refused everything
// shows it instead of having no record.
func (f *folder) chargeUnplaced() {
	if len(f.unplaced) == 0 {
		return
	}
	if len(f.groups) == 0 {
		for _, u := range f.unplaced {
			for e := range u.w.engines {
				if b, ok := f.bind(u.w, u.r, int16(e)); ok {
					f.group(b).replica(b)
				}
			}
		}
	}
	for _, k := range f.sortedKeys() {
		for _, u := range f.unplaced {
			f.groups[k].acc.add(u.w.runs[u.r.run], u.r, f.in.Request.SLO)
		}
	}
}

func (f *folder) sortedKeys() []string { return slices.Sorted(maps.Keys(f.groups)) }

// iids are the group's engines, sorted.
func (g *group) iids() []string { return slices.Sorted(maps.Keys(g.replicas)) }

// bootRecords are the replicas' boot records, each once.
func (g *group) bootRecords() []string {
	var out []string
	for _, iid := range g.iids() {
		out = appendOnce(out, g.replicas[iid].boot)
	}
	return out
}

// replicaView is one engine's share as a record shows it.
type replicaView struct {
	Offered         int     `json:"offered"`
	Completed       int     `json:"completed"`
	Met             int     `json:"met"`
	Attainment      float64 `json:"attainment"`
	AttainmentLower float64 `json:"attainment_wilson95_lower"`
	Verdict         string  `json:"verdict"`
	ProcessStart    float64 `json:"process_start_time_seconds"`
	BootRecord      string  `json:"boot_record"`
}

// perEngine is each replica's share, for the record's display.
func (g *group) perEngine(req decision.Request) (map[string]any, error) {
	out := map[string]any{}
	for _, iid := range g.iids() {
		rp := g.replicas[iid]
		s := rp.acc.finish()
		m, err := toMap(replicaView{Offered: s.Offered, Completed: s.Completed, Met: s.Met, Attainment: s.Attainment,
			AttainmentLower: s.AttainmentLower, Verdict: Verdict(s, req), ProcessStart: rp.processStart, BootRecord: rp.boot})
		if err != nil {
			return nil, err
		}
		out[iid] = m
	}
	return out, nil
}

// disagreement notes replicas of one fingerprint whose own windows, each
// with enough samples, reach different verdicts: the record judges their
// requests together, and the operator should know the replicas differ.
func (g *group) disagreement(req decision.Request) []string {
	var parts []string
	verdicts := map[string]bool{}
	for _, iid := range g.iids() {
		s := g.replicas[iid].acc.finish()
		v := Verdict(s, req)
		if v == VerdictInsufficient {
			continue
		}
		verdicts[v] = true
		parts = append(parts, fmt.Sprintf("%s %s (%.3f of %d)", iid, v, s.Attainment, s.Offered))
	}
	if len(verdicts) < 2 {
		return nil
	}
	return []string{fmt.Sprintf("endpoint %s: its replicas disagree — %s; the record judges their requests together", shortDigest(g.endpoint), strings.Join(parts, ", "))}
}

func shortDigest(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	return d
}
