package simengine

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// metrics is a small hand-written Prometheus text exposition with vLLM's
// names and labels. It is cheaper per scrape than a registry (one engine
// is scraped by many routers in tests) and needs no global state. Guarded
// by the engine's mutex.
type metrics struct {
	labels string // model_name="…",engine="0"

	counters map[string]map[string]float64 // exposition name → extra labels → value
	hists    map[string]*histogram
}

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound ≥ v: Prometheus buckets are le
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += v
	h.n++
}

var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	xferBuckets = []float64{0.001, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0}
	byteBuckets = []float64{1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30}
)

// Families, in exposition order, with their HELP text.
var counterHelp = [][2]string{
	{"vllm:prompt_tokens_total", "Number of prefill tokens processed."},
	{"vllm:generation_tokens_total", "Number of generation tokens processed."},
	{"vllm:request_success_total", "Count of successfully processed requests."},
	{"vllm:num_preemptions_total", "Cumulative number of preemption from the engine."},
	{"vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."},
	{"vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."},
	{"vllm:external_prefix_cache_queries_total", "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens."},
	{"vllm:external_prefix_cache_hits_total", "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens."},
	{"vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source."},
	{"vllm:nixl_num_failed_transfers_total", "Number of failed NIXL KV Cache transfers."},
	{"vllm:nixl_num_failed_notifications_total", "Number of failed NIXL KV Cache notifications."},
	{"vllm:nixl_num_kv_expired_reqs_total", "Number of requests that had their KV expire."},
}

var histHelp = [][2]string{
	{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds."},
	{"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds."},
	{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."},
	{"vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers."},
	{"vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers."},
}

func newMetrics(model string) *metrics {
	m := &metrics{labels: `model_name="` + escapeLabel(model) + `",engine="0"`,
		counters: map[string]map[string]float64{}, hists: map[string]*histogram{}}
	for _, c := range counterHelp {
		m.counters[c[0]] = map[string]float64{}
	}
	for _, r := range []string{"stop", "length", "abort", "error", "repetition"} {
		m.counters["vllm:request_success_total"][`finished_reason="`+r+`"`] = 0
	}
	for _, s := range []string{"local_compute", "local_cache_hit", "external_kv_transfer"} {
		m.counters["vllm:prompt_tokens_by_source_total"][`source="`+s+`"`] = 0
	}
	for name, b := range map[string][]float64{
		"vllm:time_to_first_token_seconds": ttftBuckets, "vllm:inter_token_latency_seconds": itlBuckets,
		"vllm:e2e_request_latency_seconds": e2eBuckets, "vllm:nixl_xfer_time_seconds": xferBuckets,
		"vllm:nixl_bytes_transferred": byteBuckets,
	} {
		m.hists[name] = &histogram{bounds: b, counts: make([]uint64, len(b))}
	}
	return m
}

func (m *metrics) add(name, extra string, v float64) { m.counters[name][extra] += v }

func (m *metrics) observe(name string, v float64) { m.hists[name].observe(v) }

// gauges are read from the engine at scrape time.
type gauges struct {
	running, waiting, deferred int
	kvUsage                    float64
	numBlocks, blockSize       int
	startTime                  float64
}

func (m *metrics) write(w io.Writer, g gauges) error {
	bw := bufio.NewWriterSize(w, 16<<10)
	gauge := func(name, help, extra string, v float64) {
		bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n")
		m.sample(bw, name, extra, v)
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", "", float64(g.running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "", float64(g.waiting))
	bw.WriteString("# HELP vllm:num_requests_waiting_by_reason Number of requests waiting, by reason.\n# TYPE vllm:num_requests_waiting_by_reason gauge\n")
	m.sample(bw, "vllm:num_requests_waiting_by_reason", `reason="capacity"`, float64(g.waiting))
	m.sample(bw, "vllm:num_requests_waiting_by_reason", `reason="deferred"`, float64(g.deferred))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "", g.kvUsage)
	gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
		`block_size="`+strconv.Itoa(g.blockSize)+`",num_gpu_blocks="`+strconv.Itoa(g.numBlocks)+`"`, 1)
	for _, c := range counterHelp {
		bw.WriteString("# HELP " + c[0] + " " + c[1] + "\n# TYPE " + c[0] + " counter\n")
		series := m.counters[c[0]]
		if len(series) == 0 {
			m.sample(bw, c[0], "", 0)
		}
		keys := make([]string, 0, len(series))
		for k := range series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.sample(bw, c[0], k, series[k])
		}
	}
	for _, h := range histHelp {
		m.writeHist(bw, h[0], h[1])
	}
	bw.WriteString("# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n")
	bw.WriteString("process_start_time_seconds " + fmtFloat(g.startTime) + "\n")
	return bw.Flush()
}

func (m *metrics) writeHist(bw *bufio.Writer, name, help string) {
	h := m.hists[name]
	bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n")
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		m.sample(bw, name+"_bucket", `le="`+fmtFloat(b)+`"`, float64(cum))
	}
	m.sample(bw, name+"_bucket", `le="+Inf"`, float64(h.n))
	m.sample(bw, name+"_count", "", float64(h.n))
	m.sample(bw, name+"_sum", "", h.sum)
}

func (m *metrics) sample(bw *bufio.Writer, name, extra string, v float64) {
	bw.WriteString(name + "{")
	if extra != "" {
		bw.WriteString(extra + ",")
	}
	bw.WriteString(m.labels + "} " + fmtFloat(v) + "\n")
}

func fmtFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") && !strings.Contains(s, "Inf") && !strings.Contains(s, "NaN") {
		s += ".0" // prometheus_client prints floats
	}
	return s
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
