package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/version"
)

// requests are the per-request families operators expect beside the
// outcome counters: tokens, end-to-end latency, total queue time, the KV
// handoff, and the legs open to each engine.
type requests struct {
	promptTokens, generationTokens prometheus.Counter
	e2e, queue, handoff            prometheus.Observer
	legs                           *prometheus.GaugeVec
}

func (m *Metrics) buildRequests(b builder, cfg *fleet.Config) {
	b.gaugeVec("narwhal_build_info", "Build of this router: 1, with version, revision and Go version.",
		"version", "revision", "goversion").WithLabelValues(version.Version, revision(), runtime.Version()).Set(1)
	sc := ScalesOf(cfg)
	q := &m.requests
	q.promptTokens = b.counter("narwhal_prompt_tokens_total", "Prompt tokens of requests whose prefill completed (the final attempt's).")
	q.generationTokens = b.counter("narwhal_generation_tokens_total", "Output tokens delivered to clients.")
	q.e2e = b.histogram("narwhal_e2e_request_seconds", "Router arrival to the end of the response, completed requests, seconds.", sc.E2E).WithLabelValues()
	q.queue = b.histogram("narwhal_request_queue_seconds", "Time a request spent queued across all stages, seconds.", sc.QueueWait).WithLabelValues()
	q.handoff = b.histogram("narwhal_kv_handoff_seconds", "Prefill completion to the first decode token when the KV moved between engines, seconds.", sc.TTFT).WithLabelValues()
	q.legs = b.gaugeVec("narwhal_engine_inflight_legs", "HTTP legs the router has open to each engine, by phase.", "iid", "phase")
	for _, e := range cfg.Engines {
		q.legs.WithLabelValues(e.IID, string(fault.Prefill))
		q.legs.WithLabelValues(e.IID, string(fault.Decode))
	}
}

// revision is the VCS revision the binary was built from, "" when unknown.
func revision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// ObserveRequest records a settled request's tokens, latencies and
// queueing from its terminal journal row: one place turns a row into the
// per-request series, so they always agree with the journal.
func (m *Metrics) ObserveRequest(row *journal.RequestRow) {
	q := &m.requests
	if row.TTFT != nil {
		q.promptTokens.Add(float64(row.InputLen))
	}
	if row.OutputLen != nil {
		q.generationTokens.Add(float64(*row.OutputLen))
	}
	if row.Terminal == journal.TerminalCompleted {
		q.e2e.Observe(row.DurationS)
	}
	if row.InputSized {
		q.queue.Observe(row.QueueWait)
	}
	if row.Crossed != nil && *row.Crossed && row.TTFT != nil && row.FirstByte != nil {
		q.handoff.Observe(max(0, *row.FirstByte-*row.TTFT))
	}
	m.observeStageWaits(row)
}

// observeStageWaits records narwhal_queue_wait_seconds once per stage the
// request reached: admission once sized, prefill once placed on a
// producer, decode once placed on a consumer.
func (m *Metrics) observeStageWaits(row *journal.RequestRow) {
	w := row.QueueWaits
	if row.InputSized || w.Admission > 0 {
		m.ObserveQueueWait(fault.Admission, w.Admission)
	}
	if row.PrefillIID != nil {
		m.ObserveQueueWait(fault.Prefill, w.Prefill)
	}
	if row.DecodeIID != nil {
		m.ObserveQueueWait(fault.Decode, w.Decode)
	}
}

// LegStarted counts a leg opened to engine iid in phase (prefill,
// decode); LegEnded closes it.
func (m *Metrics) LegStarted(iid string, phase fault.Phase) {
	m.requests.legs.WithLabelValues(iid, string(phase)).Inc()
}

// LegEnded: see LegStarted.
func (m *Metrics) LegEnded(iid string, phase fault.Phase) {
	m.requests.legs.WithLabelValues(iid, string(phase)).Dec()
}
