package metrics

import (
	"io"
	"math"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

func testConfig() *fleet.Config {
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 2, TPOT: 0.05}
	cfg.Engines = []fleet.Engine{{IID: "e1", Role: fleet.Prefill}, {IID: "e2", Role: fleet.Decode}, {IID: "e3", Role: fleet.Decode}}
	cfg.Serving.QueueCapacity, cfg.Serving.QueueTimeoutS = 64, 4
	return &cfg
}

// scrape fetches /metrics through Handler and parses the text format.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("content type %q, want text 0.0.4", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.Reader(rec.Body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	return fams
}

// families is every narwhal_* family this package exports with its type;
// a rename, a dropped family or a new unlisted one breaks this test.
var families = map[string]dto.MetricType{
	"narwhal_cache_placements_total":               dto.MetricType_COUNTER,
	"narwhal_cache_predicted_tokens_total":         dto.MetricType_COUNTER,
	"narwhal_cache_reported_tokens_total":          dto.MetricType_COUNTER,
	"narwhal_residency_known":                      dto.MetricType_GAUGE,
	"narwhal_contract_info":                        dto.MetricType_GAUGE,
	"narwhal_admission_info":                       dto.MetricType_GAUGE,
	"narwhal_admission_margin":                     dto.MetricType_GAUGE,
	"narwhal_slo_seconds":                          dto.MetricType_GAUGE,
	"narwhal_router_ready":                         dto.MetricType_GAUGE,
	"narwhal_router_lease_epoch":                   dto.MetricType_GAUGE,
	"narwhal_lease_reacquired_total":               dto.MetricType_COUNTER,
	"narwhal_profile_reloads_total":                dto.MetricType_COUNTER,
	"narwhal_offered_total":                        dto.MetricType_COUNTER,
	"narwhal_unsized_offered_total":                dto.MetricType_COUNTER,
	"narwhal_served_total":                         dto.MetricType_COUNTER,
	"narwhal_slo_met_total":                        dto.MetricType_COUNTER,
	"narwhal_failed_total":                         dto.MetricType_COUNTER,
	"narwhal_expired_total":                        dto.MetricType_COUNTER,
	"narwhal_refused_total":                        dto.MetricType_COUNTER,
	"narwhal_rejected_total":                       dto.MetricType_COUNTER,
	"narwhal_cancelled_total":                      dto.MetricType_COUNTER,
	"narwhal_invalid_requests_total":               dto.MetricType_COUNTER,
	"narwhal_unserved_total":                       dto.MetricType_COUNTER,
	"narwhal_prefill_attempts_total":               dto.MetricType_COUNTER,
	"narwhal_decode_attempts_total":                dto.MetricType_COUNTER,
	"narwhal_retry_attempts_total":                 dto.MetricType_COUNTER,
	"narwhal_attempt_failures_total":               dto.MetricType_COUNTER,
	"narwhal_served_after_retry_total":             dto.MetricType_COUNTER,
	"narwhal_retry_credits":                        dto.MetricType_GAUGE,
	"narwhal_retry_credits_spent_total":            dto.MetricType_COUNTER,
	"narwhal_retry_denied_total":                   dto.MetricType_COUNTER,
	"narwhal_decode_tokens_observed_total":         dto.MetricType_COUNTER,
	"narwhal_upstream_seconds_total":               dto.MetricType_COUNTER,
	"narwhal_queued":                               dto.MetricType_GAUGE,
	"narwhal_queue_capacity":                       dto.MetricType_GAUGE,
	"narwhal_queue_high_water":                     dto.MetricType_GAUGE,
	"narwhal_waiting_prefill":                      dto.MetricType_GAUGE,
	"narwhal_waiting_decode":                       dto.MetricType_GAUGE,
	"narwhal_deadline_queue_depth":                 dto.MetricType_GAUGE,
	"narwhal_deadline_queue_kv_tokens":             dto.MetricType_GAUGE,
	"narwhal_deadline_queue_limit":                 dto.MetricType_GAUGE,
	"narwhal_deadline_queue_drain_seconds":         dto.MetricType_GAUGE,
	"narwhal_admission_inflight":                   dto.MetricType_GAUGE,
	"narwhal_admission_inflight_limit":             dto.MetricType_GAUGE,
	"narwhal_http_retained":                        dto.MetricType_GAUGE,
	"narwhal_http_retained_limit":                  dto.MetricType_GAUGE,
	"narwhal_http_retained_high_water":             dto.MetricType_GAUGE,
	"narwhal_router_loop_lag_seconds":              dto.MetricType_GAUGE,
	"narwhal_request_sizing_delay_seconds":         dto.MetricType_GAUGE,
	"narwhal_saturation_threshold_seconds":         dto.MetricType_GAUGE,
	"narwhal_monitoring_degraded":                  dto.MetricType_GAUGE,
	"narwhal_monitoring_core_consecutive_failures": dto.MetricType_GAUGE,
	"narwhal_monitoring_core_failures_total":       dto.MetricType_COUNTER,
	"narwhal_leg_reports_inline_total":             dto.MetricType_COUNTER,
	"narwhal_prefill_below_floor":                  dto.MetricType_GAUGE,
	"narwhal_decode_below_floor":                   dto.MetricType_GAUGE,
	"narwhal_decode_floor":                         dto.MetricType_GAUGE,
	"narwhal_pool_instances":                       dto.MetricType_GAUGE,
	"narwhal_pool_load":                            dto.MetricType_GAUGE,
	"narwhal_instance_role":                        dto.MetricType_GAUGE,
	"narwhal_resident_requests":                    dto.MetricType_GAUGE,
	"narwhal_ejected_instances":                    dto.MetricType_GAUGE,
	"narwhal_ejected":                              dto.MetricType_GAUGE,
	"narwhal_flips_total":                          dto.MetricType_COUNTER,
	"narwhal_flip_reversals_total":                 dto.MetricType_COUNTER,
	"narwhal_flips_refused_total":                  dto.MetricType_COUNTER,
	"narwhal_flip_inflight_total":                  dto.MetricType_COUNTER,
	"narwhal_controller_advisory":                  dto.MetricType_GAUGE,
	"narwhal_controller_decisions_total":           dto.MetricType_COUNTER,
	"narwhal_ttft_seconds":                         dto.MetricType_HISTOGRAM,
	"narwhal_tpot_seconds":                         dto.MetricType_HISTOGRAM,
	"narwhal_queue_wait_seconds":                   dto.MetricType_HISTOGRAM,
	"narwhal_seat_seconds":                         dto.MetricType_HISTOGRAM,
	"narwhal_engine_ejections_total":               dto.MetricType_COUNTER,
	"narwhal_engine_readmissions_total":            dto.MetricType_COUNTER,
	"narwhal_engine_breaker_streak":                dto.MetricType_GAUGE,
	"narwhal_engine_lifecycle_state":               dto.MetricType_GAUGE,
	"narwhal_engine_draining":                      dto.MetricType_GAUGE,
	"narwhal_probation_instances":                  dto.MetricType_GAUGE,
	"narwhal_health_prefill_paused":                dto.MetricType_GAUGE,
	"narwhal_health_windows_scored_total":          dto.MetricType_COUNTER,
	"narwhal_health_windows_undersampled_total":    dto.MetricType_COUNTER,
	"narwhal_health_prefill_pauses_total":          dto.MetricType_COUNTER,
	"narwhal_engine_held":                          dto.MetricType_GAUGE,
	"narwhal_endpoint_tier":                        dto.MetricType_GAUGE,
	"narwhal_build_info":                           dto.MetricType_GAUGE,
	"narwhal_prompt_tokens_total":                  dto.MetricType_COUNTER,
	"narwhal_generation_tokens_total":              dto.MetricType_COUNTER,
	"narwhal_e2e_request_seconds":                  dto.MetricType_HISTOGRAM,
	"narwhal_request_queue_seconds":                dto.MetricType_HISTOGRAM,
	"narwhal_kv_handoff_seconds":                   dto.MetricType_HISTOGRAM,
	"narwhal_engine_inflight_legs":                 dto.MetricType_GAUGE,
}

func TestEveryFamilyPresentFromStart(t *testing.T) {
	fams := scrape(t, New(testConfig()))
	for name, typ := range families {
		f, ok := fams[name]
		switch {
		case !ok:
			t.Errorf("%s missing from a fresh scrape", name)
		case f.GetType() != typ:
			t.Errorf("%s is %v, want %v", name, f.GetType(), typ)
		case f.GetHelp() == "":
			t.Errorf("%s has no HELP", name)
		}
	}
	for name := range fams {
		if _, listed := families[name]; strings.HasPrefix(name, "narwhal_") && !listed {
			t.Errorf("%s is exported but not listed in this test", name)
		}
	}
	for _, want := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := fams[want]; !ok && (want != "process_start_time_seconds" || procAvailable()) {
			t.Errorf("%s missing: the Go/process collectors are not registered", want)
		}
	}
}

// labelSets returns "k=v,k=v" for each series of a family, sorted.
func labelSets(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var kv []string
		for _, l := range m.GetLabel() {
			kv = append(kv, l.GetName()+"="+l.GetValue())
		}
		out = append(out, strings.Join(kv, ","))
	}
	sort.Strings(out)
	return out
}

// sample is one series a test expects: its family, its labels as
// "k=v,k=v" in label order, and its value.
type sample struct {
	family, labels string
	want           float64
}

// wantSamples checks every expected series is present with its value.
func wantSamples(t *testing.T, fams map[string]*dto.MetricFamily, cases []sample) {
	t.Helper()
	for _, c := range cases {
		got, ok := value(fams[c.family], c.labels)
		if !ok || got != c.want {
			t.Errorf("%s{%s} = %g (present %v), want %g", c.family, c.labels, got, ok, c.want)
		}
	}
}

func value(f *dto.MetricFamily, labels string) (float64, bool) {
	for _, m := range f.GetMetric() {
		var kv []string
		for _, l := range m.GetLabel() {
			kv = append(kv, l.GetName()+"="+l.GetValue())
		}
		if strings.Join(kv, ",") == labels {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

func TestReasonLabelsPrecreatedAtZero(t *testing.T) {
	fams := scrape(t, New(testConfig()))
	cases := []struct {
		family, label string
		values        []string
	}{
		{"narwhal_failed_total", "reason", journal.FailedReasons()},
		{"narwhal_expired_total", "reason", journal.ExpiredReasons()},
		{"narwhal_refused_total", "cause", journal.RefusedCauses()},
		{"narwhal_rejected_total", "reason", journal.RejectedReasons()},
		{"narwhal_upstream_seconds_total", "phase", []string{"decode", "prefill"}},
		{"narwhal_flip_inflight_total", "phase", []string{"decode", "prefill"}},
	}
	for _, c := range cases {
		var want []string
		for _, v := range c.values {
			want = append(want, c.label+"="+v)
		}
		sort.Strings(want)
		got := labelSets(fams[c.family])
		if !slices.Equal(got, want) {
			t.Errorf("%s series %v, want %v", c.family, got, want)
		}
		for _, m := range fams[c.family].GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%s%v starts at %g", c.family, m.GetLabel(), m.GetCounter().GetValue())
			}
		}
	}
	if got := labelSets(fams["narwhal_rejected_total"]); slices.Contains(got, "reason=unclassified") {
		t.Error("unclassified must appear only once counted")
	}
	flips := labelSets(fams["narwhal_flips_total"])
	want := []string{"by=decode_floor,to=decode", "by=floor_recovery,to=prefill", "by=reactive,to=decode", "by=reactive,to=prefill"}
	if !slices.Equal(flips, want) {
		t.Errorf("flips_total series %v, want %v", flips, want)
	}
	if n := len(fams["narwhal_attempt_failures_total"].GetMetric()); n != 2*len(journal.FailedReasons()) {
		t.Errorf("attempt_failures_total has %d series, want prefill and decode × every failure reason", n)
	}
	if n := len(fams["narwhal_controller_decisions_total"].GetMetric()); n != 12 {
		t.Errorf("controller_decisions_total has %d series, want 3 deciders × 4 results", n)
	}
}

func TestConfigEchoes(t *testing.T) {
	cfg := testConfig()
	cfg.Serving.AdmissionMargin = 0.1
	cfg.Controller.Advisory = true
	fams := scrape(t, New(cfg))
	cases := []sample{
		{"narwhal_contract_info", "contract=metrics,version=1", 1},
		{"narwhal_admission_info", "mode=predictive", 1},
		{"narwhal_admission_margin", "", 0.1},
		{"narwhal_slo_seconds", "metric=ttft,slo=2", 2},
		{"narwhal_slo_seconds", "metric=tpot,slo=0.05", 0.05},
		{"narwhal_retry_credits", "", 10},
		{"narwhal_queue_capacity", "", 64},
		{"narwhal_admission_inflight_limit", "", 512},
		{"narwhal_http_retained_limit", "", 576},
		{"narwhal_saturation_threshold_seconds", "", 0.5},
		{"narwhal_decode_floor", "", 1},
		{"narwhal_controller_advisory", "", 1},
		{"narwhal_router_ready", "", 0},
		{"narwhal_pool_instances", "role=prefill", 1},
		{"narwhal_pool_instances", "role=decode", 2},
		{"narwhal_instance_role", "iid=e1,role=prefill", 1},
		{"narwhal_instance_role", "iid=e2,role=prefill", 0},
		{"narwhal_instance_role", "iid=e2,role=decode", 1},
		{"narwhal_ejected", "iid=e3", 0},
		{"narwhal_resident_requests", "iid=e3,phase=decode", 0},
	}
	wantSamples(t, fams, cases)
}

func TestHistogramBucketsFollowTheSLO(t *testing.T) {
	m := New(testConfig())
	m.ObserveTTFT(1.9)
	m.ObserveTPOT(0.06)
	m.ObserveSeat(0.01)
	m.ObserveQueueWait("prefill", 0.3)
	fams := scrape(t, m)
	cases := []struct {
		family, stage string
		scale         float64
	}{
		{"narwhal_ttft_seconds", "", 2},
		{"narwhal_tpot_seconds", "", 0.05},
		{"narwhal_seat_seconds", "", 2},
		{"narwhal_queue_wait_seconds", "prefill", 4},
	}
	for _, c := range cases {
		for _, s := range fams[c.family].GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["stage"] != c.stage {
				continue
			}
			if labels["slo"] != SLOLabel(c.scale) {
				t.Errorf("%s slo label %q, want %q", c.family, labels["slo"], SLOLabel(c.scale))
			}
			var got []float64
			for _, b := range s.GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			want := append(Buckets(c.scale), math.Inf(1))
			if !slices.Equal(got, want) {
				t.Errorf("%s buckets %v, want %v", c.family, got, want)
			}
			if s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s{stage=%q} count %d, want 1", c.family, c.stage, s.GetHistogram().GetSampleCount())
			}
		}
	}
	if n := len(fams["narwhal_queue_wait_seconds"].GetMetric()); n != 3 {
		t.Errorf("queue_wait_seconds has %d stages, want admission, prefill, decode", n)
	}
}

func TestRecordingMethods(t *testing.T) {
	m := New(testConfig())
	m.Offered.Add(3)
	m.Failed(string(fault.EngineTimeout))
	m.Failed(string(fault.EngineTimeout))
	m.Expired(string(fault.Handoff))
	m.Refused(journal.CauseSlotWait)
	m.Rejected(string(fault.Saturated))
	m.AttemptFailed(fault.Queue, fault.LocalPool)
	m.Upstream(fault.Decode, 1.25)
	m.Flip("reactive", "decode")
	m.FlipInflight(fault.Decode, 4)
	m.Decision("reactive", "held")
	m.Restore(Outcomes{Served: 7, Rejected: map[string]float64{string(fault.Unclassified): 2}})
	m.SetHeld("e2", "engine-auth", true)
	m.SetHeld("e3", "incompatible-kv", true)
	m.SetHeld("e3", "incompatible-kv", false)
	fams := scrape(t, m)
	cases := []sample{
		{"narwhal_offered_total", "", 3},
		{"narwhal_failed_total", "reason=engine_timeout", 2},
		{"narwhal_failed_total", "reason=engine_error", 0},
		{"narwhal_expired_total", "reason=handoff", 1},
		{"narwhal_refused_total", "cause=slot_wait", 1},
		{"narwhal_rejected_total", "reason=saturated", 1},
		{"narwhal_rejected_total", "reason=unclassified", 2},
		{"narwhal_attempt_failures_total", "phase=queue,reason=local_pool", 1},
		{"narwhal_upstream_seconds_total", "phase=decode", 1.25},
		{"narwhal_flips_total", "by=reactive,to=decode", 1},
		{"narwhal_flip_inflight_total", "phase=decode", 4},
		{"narwhal_controller_decisions_total", "by=reactive,result=held", 1},
		{"narwhal_served_total", "", 7},
		{"narwhal_engine_held", "cause=engine-auth,iid=e2", 1},
		{"narwhal_engine_held", "cause=incompatible-build,iid=e2", 0},
		{"narwhal_engine_held", "cause=incompatible-kv,iid=e3", 0},
	}
	wantSamples(t, fams, cases)
}

func TestSetPools(t *testing.T) {
	m := New(testConfig())
	m.SetPools(Pools{
		Prefill: []string{"e1", "e2"}, Decode: []string{"e4"}, PrefillLoad: 1.2, DecodeLoad: 0.4,
		Resident: map[string]Resident{"e1": {Prefill: 3}, "e4": {Decode: 9}}, Ejected: []string{"e3"},
	})
	check := func(fams map[string]*dto.MetricFamily, cases map[string]float64) {
		t.Helper()
		for key, want := range cases {
			fam, labels, _ := strings.Cut(key, "|")
			got, ok := value(fams[fam], labels)
			if !ok || got != want {
				t.Errorf("%s{%s} = %g (present %v), want %g", fam, labels, got, ok, want)
			}
		}
	}
	check(scrape(t, m), map[string]float64{
		"narwhal_pool_instances|role=prefill":            2,
		"narwhal_pool_instances|role=decode":             1,
		"narwhal_pool_load|role=prefill":                 1.2,
		"narwhal_instance_role|iid=e2,role=prefill":      1,
		"narwhal_instance_role|iid=e2,role=decode":       0,
		"narwhal_instance_role|iid=e3,role=decode":       0,
		"narwhal_instance_role|iid=e4,role=decode":       1,
		"narwhal_resident_requests|iid=e1,phase=prefill": 3,
		"narwhal_resident_requests|iid=e4,phase=decode":  9,
		"narwhal_ejected|iid=e3":                         1,
		"narwhal_ejected|iid=e1":                         0,
		"narwhal_ejected_instances|":                     1,
	})
	// Aggregated: no prefill pool, decode engines also report prefill; a
	// vanished engine reads 0 instead of disappearing.
	m.SetPools(Pools{Decode: []string{"e1", "e2"}})
	check(scrape(t, m), map[string]float64{
		"narwhal_instance_role|iid=e1,role=prefill":     1,
		"narwhal_instance_role|iid=e1,role=decode":      1,
		"narwhal_instance_role|iid=e4,role=decode":      0,
		"narwhal_resident_requests|iid=e4,phase=decode": 0,
		"narwhal_ejected|iid=e3":                        0,
		"narwhal_ejected_instances|":                    0,
	})
}

func TestTwoRoutersDoNotShareState(t *testing.T) {
	a, b := New(testConfig()), New(testConfig())
	a.Served.Inc()
	got, _ := value(scrape(t, b)["narwhal_served_total"], "")
	if got != 0 {
		t.Fatalf("a second Metrics saw the first one's count: %g", got)
	}
}

func TestEndpointTierGauge(t *testing.T) {
	m := New(testConfig())
	iid := testConfig().Engines[0].IID
	m.SetEndpointTier(iid, "conservative")
	fams := scrape(t, m)
	for _, mt := range fams["narwhal_endpoint_tier"].GetMetric() {
		labels := map[string]string{}
		for _, l := range mt.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := 0.0
		if labels["iid"] == iid && labels["tier"] == "conservative" || labels["iid"] != iid && labels["tier"] == "none" {
			want = 1 // the others stay at none until a pass publishes theirs
		}
		if mt.GetGauge().GetValue() != want {
			t.Errorf("narwhal_endpoint_tier%v = %v, want %v", labels, mt.GetGauge().GetValue(), want)
		}
	}
}
