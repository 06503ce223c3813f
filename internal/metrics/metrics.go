// Package metrics owns every narwhal_* series the router exports
// (narwhal.metrics v1, runtime.md §6): the one place metric names are
// spelled (DESIGN.md rule 3). The router never writes a name; it calls
//
//	m := metrics.New(cfg)              // fresh registry, no global state
//	http.Handle("GET /metrics", m.Handler())
//	m.Offered.Inc()                    // plain counters and gauges are fields
//	m.Failed(fault.EngineTimeout) // labelled outcomes are methods
//	m.Refused(journal.CauseQueue)
//	m.AttemptFailed(fault.Decode, fault.EngineError)
//	m.ObserveTTFT(0.41); m.ObserveQueueWait(fault.Prefill, 0.02)
//	m.Flip("reactive", "decode"); m.Decision("reactive", "applied")
//	m.SetPools(metrics.Pools{...})     // from each sched snapshot
//
// Reason and cause label values are the journal's constants; every
// documented value exists at 0 from the start so that rate() and alerts
// see a series before the first event. Histograms use SLO-derived buckets
// (Buckets) and carry an slo label with the scale. Counters restored from
// a handoff are added once with Restore before serving.
package metrics

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// ContractVersion is the narwhal.metrics version this package exports.
const ContractVersion = "1"

// Metrics holds the router's collectors on its own registry. Fields are
// safe for concurrent use, as are all methods.
type Metrics struct {
	reg *prometheus.Registry

	// Outcomes (§1.17). Exactly one terminal counter moves per request.
	Offered, UnsizedOffered, Served, SLOMet prometheus.Counter
	Cancelled, Invalid, Unserved            prometheus.Counter

	// Attempts and the shared retry budget (§1.15).
	PrefillAttempts, DecodeAttempts, RetryAttempts prometheus.Counter
	ServedAfterRetry, RetryCreditsSpent            prometheus.Counter
	RetryDenied, DecodeTokensObserved              prometheus.Counter
	RetryCredits                                   prometheus.Gauge

	// Queueing, in-flight and saturation (§1.7, operations §7.4).
	Queued, QueueCapacity, QueueHighWater, WaitingPrefill, WaitingDecode prometheus.Gauge
	// The scheduling core's deadline queue (sched/queue.go).
	DeadlineQueueDepth, DeadlineQueueKVTokens, DeadlineQueueLimit, DeadlineQueueDrain prometheus.Gauge
	AdmissionInflight, AdmissionInflightLimit                                         prometheus.Gauge
	HTTPRetained, HTTPRetainedLimit, HTTPRetainedHighWater                            prometheus.Gauge
	LoopLag, SizingDelay, SaturationThreshold                                         prometheus.Gauge

	// Router readiness, lease and monitoring (§3.4, §3.8).
	RouterReady, LeaseEpoch                          prometheus.Gauge
	LeaseReacquired                                  prometheus.Counter
	ProfileReloads                                   *prometheus.CounterVec // result: taken, refused
	MonitoringDegraded, MonitoringCoreConsecutive    prometheus.Gauge
	MonitoringCoreFailures                           prometheus.Counter
	LegReportsInline                                 prometheus.Counter // failed legs a full queue left to their request
	PrefillBelowFloor, DecodeBelowFloor, DecodeFloor prometheus.Gauge
	ControllerAdvisory                               prometheus.Gauge
	FlipReversals, FlipsRefused                      prometheus.Counter

	failed, expired, refused, rejected *prometheus.CounterVec
	attemptFailures, upstream          *prometheus.CounterVec
	flips, decisions, flipInflight     *prometheus.CounterVec

	ttft, tpot, seat prometheus.Observer
	queueWait        *prometheus.HistogramVec

	requests requests
	pools    *pools
	health   health
	drift    *drift
	tiers    *prometheus.GaugeVec
	cache    *cache
}

// New builds the collectors for cfg on a fresh registry, with the Go
// runtime and process collectors operators expect beside them, and sets
// the series that echo configuration (SLO budgets, admission mode and
// margin, limits, the retry budget, the decode floor, advisory mode).
func New(cfg *fleet.Config) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b := builder{reg}
	m := &Metrics{reg: reg}
	m.buildInfo(b, cfg)
	m.buildOutcomes(b)
	m.buildAttempts(b, cfg)
	m.buildQueueing(b, cfg)
	m.buildControl(b, cfg)
	m.buildLatency(b, cfg)
	m.buildRequests(b, cfg)
	m.pools = newPools(b, cfg)
	m.health = newHealth(b, cfg)
	m.tiers = newTiers(b, cfg)
	m.drift = newDrift(b, cfg)
	m.cache = newCache(b, cfg)
	return m
}

// Registry returns the registry, for tests and for adding collectors the
// router owns (e.g. an engine-scrape collector).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus text format 0.0.4, or in
// OpenMetrics 1.0 to a scraper whose Accept header asks for
// application/openmetrics-text (Prometheus does by default).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

// pools tracks the per-engine series set by SetPools; the iid set only
// grows, so an engine that leaves a snapshot reads 0 instead of vanishing.
type pools struct {
	mu                      sync.Mutex
	iids                    map[string]bool
	instances, load         *prometheus.GaugeVec
	role, resident, ejected *prometheus.GaugeVec
	ejectedN                prometheus.Gauge
}
