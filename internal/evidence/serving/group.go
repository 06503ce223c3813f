// Package serving turns the router's journal into serving-performance
// evidence (reference/evidence.md §4.4): per engine execution, over a
// window, SLO attainment under the accepted DecisionRequest's rule with
// every unserved offer in the denominator, goodput, TTFT/TPOT percentiles,
// refusals and the offered workload's shape. A window that spans an engine
// restart splits by process generation, and each generation is bound to
// the execution fingerprint preflight recorded for that process.
//
// Records hold counts, distributions and percentiles only: no prompt,
// output or client request id leaves the journal (INV-26). The package is
// deterministic: the clock comes in as a port.
package serving

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// Binding ties an engine process to the execution it runs: the boot
// record preflight wrote for it.
type Binding struct {
	IID           string
	ProcessStart  float64 // 0 when the record does not say
	Endpoint      string  // execution fingerprint
	EngineVersion string
	BootRecord    string // digest
	ObservedAt    string
}

// rowRef is one request row with the generation of each engine at its
// position in the journal.
type rowRef struct {
	run string
	row *journal.RequestRow
	gen map[string]int
}

// generation is one engine process as the journal sees it.
type generation struct {
	iid          string
	index        int
	processStart float64 // 0: unknown
}

// split walks a journal in file order, numbering each engine's process
// generations at every process_excluded lifecycle event that names a new
// process start.
func split(j *journal.Journal, iids []string) ([]rowRef, map[string][]generation) {
	type item struct {
		line int
		req  *journal.Record
		ev   *journal.Record
	}
	var items []item
	for i := range j.Requests {
		items = append(items, item{line: j.Requests[i].Line, req: &j.Requests[i]})
	}
	for i := range j.Events {
		items = append(items, item{line: j.Events[i].Line, ev: &j.Events[i]})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].line < items[b].line })
	gens := map[string][]generation{}
	for _, iid := range iids {
		gens[iid] = []generation{{iid: iid}}
	}
	var rows []rowRef
	for _, it := range items {
		if it.ev != nil {
			advance(gens, it.ev.Event)
			continue
		}
		cur := map[string]int{}
		for iid, gs := range gens {
			cur[iid] = len(gs) - 1
		}
		rows = append(rows, rowRef{run: it.req.Run, row: it.req.Request, gen: cur})
	}
	return rows, gens
}

// advance opens a new generation when the router excluded a process
// because its identity changed to a new, known process start.
func advance(gens map[string][]generation, ev *journal.Event) {
	if ev.Name != journal.EventEngineLifecycle || ev.Fields["action"] != "process_excluded" {
		return
	}
	iid, _ := ev.Fields["iid"].(string)
	prev, _ := ev.Fields["previous_process_start"].(float64)
	obs, _ := ev.Fields["observed_process_start"].(float64)
	gs, ok := gens[iid]
	if !ok || obs <= 0 || obs == prev {
		return
	}
	if last := &gs[len(gs)-1]; last.processStart == 0 && prev > 0 {
		last.processStart = prev
	}
	gens[iid] = append(gs, generation{iid: iid, index: len(gs), processStart: obs})
}

// bind finds the boot record for a generation: the one for the same
// process start, or — when the journal does not say which process it was
// — the engine's latest boot record.
func bind(g generation, bindings []Binding) (Binding, error) {
	var latest *Binding
	for i := range bindings {
		b := &bindings[i]
		if b.IID != g.iid {
			continue
		}
		if g.processStart > 0 && b.ProcessStart == g.processStart {
			return *b, nil
		}
		if latest == nil || later(b.ObservedAt, latest.ObservedAt) || b.ObservedAt == latest.ObservedAt && b.BootRecord > latest.BootRecord {
			latest = b
		}
	}
	if g.processStart > 0 || latest == nil {
		return Binding{}, fmt.Errorf("engine %s generation %d (process start %.3f) has no boot record: run narwhal-check against it so its serving evidence can be bound to an execution fingerprint", g.iid, g.index, g.processStart)
	}
	return *latest, nil
}

// engines lists the engines a row touched, or every engine when it was
// never placed (a refusal counts against every engine live in the window:
// unserved offers stay in the denominator).
func engines(r *journal.RequestRow, all []string) []string {
	var out []string
	for _, p := range []*string{r.PrefillIID, r.DecodeIID} {
		if p != nil && *p != "" && !slices.Contains(out, *p) {
			out = append(out, *p)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// later compares two RFC 3339 times (a string compare misorders
// fractional seconds).
func later(a, b string) bool {
	ta, _ := time.Parse(time.RFC3339Nano, a)
	tb, _ := time.Parse(time.RFC3339Nano, b)
	return ta.After(tb)
}

// BindingsFrom lists every boot record as a binding.
func BindingsFrom(records []store.Stored) []Binding {
	var out []Binding
	for _, s := range records {
		r := s.Record
		iid, _ := r.Display["engine_iid"].(string)
		if r.Kind != evidence.KindBoot || iid == "" || r.Subject[evidence.SubjectEndpoint] == "" {
			continue
		}
		ps, _ := r.Display["process_start_time_seconds"].(float64)
		out = append(out, Binding{IID: iid, ProcessStart: ps, Endpoint: r.Subject[evidence.SubjectEndpoint], EngineVersion: r.Engine.Version,
			BootRecord: s.Digest, ObservedAt: r.ObservedAt})
	}
	return out
}
