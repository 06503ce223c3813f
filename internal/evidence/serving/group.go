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
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/vllm"
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

// generation is one engine process as the journal sees it.
type generation struct {
	iid          string
	index        int
	processStart float64 // 0: unknown
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
		if g.processStart > 0 && vllm.SameStart(b.ProcessStart, g.processStart) {
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
