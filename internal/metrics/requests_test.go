package metrics

import (
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// A settled row moves the token counters, the e2e, queue and handoff
// histograms, and the per-stage queue waits of the stages it reached.
func TestObserveRequest(t *testing.T) {
	m := New(testConfig())
	m.ObserveRequest(&journal.RequestRow{RID: "a", Terminal: journal.TerminalCompleted, InputLen: 100, InputSized: true,
		OutputLen: journal.Ptr(7), TTFT: journal.Ptr(0.5), FirstByte: journal.Ptr(0.8), Crossed: journal.Ptr(true),
		DurationS: 1.2, QueueWait: 0.3, QueueWaits: journal.QueueWaits{Admission: 0.1, Prefill: 0.2},
		PrefillIID: journal.Ptr("e1"), DecodeIID: journal.Ptr("e2")})
	m.ObserveRequest(&journal.RequestRow{RID: "b", Terminal: journal.TerminalRefused, InputLen: 50, InputSized: true})
	m.ObserveRequest(&journal.RequestRow{RID: "c", Terminal: journal.TerminalInvalid})
	fams := scrape(t, m)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"narwhal_prompt_tokens_total", 100},
		{"narwhal_generation_tokens_total", 7},
	} {
		if got := fams[c.name].GetMetric()[0].GetCounter().GetValue(); got != c.want {
			t.Errorf("%s = %g, want %g", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		count uint64
		sum   float64
	}{
		{"narwhal_e2e_request_seconds", 1, 1.2},
		{"narwhal_request_queue_seconds", 2, 0.3},
		{"narwhal_kv_handoff_seconds", 1, 0.3},
	} {
		h := fams[c.name].GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != c.count || math.Abs(h.GetSampleSum()-c.sum) > 1e-9 {
			t.Errorf("%s: count %d sum %g, want %d and %g", c.name, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	stages := map[string]uint64{}
	for _, s := range fams["narwhal_queue_wait_seconds"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "stage" {
				stages[l.GetValue()] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	if stages["admission"] != 2 || stages["prefill"] != 1 || stages["decode"] != 1 {
		t.Errorf("queue waits per stage %v, want admission 2, prefill 1, decode 1", stages)
	}
}

// The e2e histogram's buckets follow the SLO budget of E2ETokens tokens.
func TestE2EBucketsFollowTheSLO(t *testing.T) {
	fams := scrape(t, New(testConfig())) // ttft 2, tpot 0.05: scale 14.8
	s := fams["narwhal_e2e_request_seconds"].GetMetric()[0]
	b := s.GetHistogram().GetBucket()
	if got := b[7].GetUpperBound(); got != 14.8 { // fraction 1.0
		t.Errorf("e2e bucket at fraction 1 = %g, want 14.8 (2 + 256 × 0.05)", got)
	}
	if s.GetLabel()[0].GetValue() != "14.8" {
		t.Errorf("e2e slo label %q, want 14.8", s.GetLabel()[0].GetValue())
	}
}

// Every configured engine has its in-flight leg gauges from start; legs
// open and close.
func TestInflightLegs(t *testing.T) {
	m := New(testConfig())
	m.LegStarted("e2", fault.Decode)
	m.LegStarted("e2", fault.Decode)
	m.LegEnded("e2", fault.Decode)
	got := map[string]float64{}
	for _, s := range scrape(t, m)["narwhal_engine_inflight_legs"].GetMetric() {
		got[s.GetLabel()[0].GetValue()+"/"+s.GetLabel()[1].GetValue()] = s.GetGauge().GetValue()
	}
	if len(got) != 6 || got["e2/decode"] != 1 || got["e1/prefill"] != 0 {
		t.Errorf("inflight legs %v, want 3 engines × 2 phases with e2/decode = 1", got)
	}
}

// A scraper that asks for OpenMetrics gets it (with # EOF); one that does
// not gets the text format.
func TestOpenMetricsNegotiation(t *testing.T) {
	m := New(testConfig())
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	m.Handler().ServeHTTP(rec, req)
	if ct := expfmt.ResponseFormat(rec.Result().Header); ct.FormatType() != expfmt.TypeOpenMetrics {
		t.Errorf("content type %q, want OpenMetrics", rec.Header().Get("Content-Type"))
	}
	if body := rec.Body.String(); !strings.HasSuffix(body, "# EOF\n") || !strings.Contains(body, "narwhal_served_total 0") {
		t.Errorf("OpenMetrics body lacks # EOF or narwhal_served_total:\n%.300s", body)
	}
	scrape(t, m) // asserts text 0.0.4 without Accept
}

// Latency reads the TTFT and TPOT histograms cumulatively.
func TestLatencyRead(t *testing.T) {
	m := New(testConfig())
	m.ObserveTTFT(0.15)
	m.ObserveTTFT(3)
	m.ObserveTPOT(0.01)
	ttft, tpot := m.Latency()
	if ttft.Count != 2 || tpot.Count != 1 || len(ttft.Bounds) != 11 || ttft.Bounds[2] != 0.2 {
		t.Fatalf("ttft %+v tpot %+v", ttft, tpot)
	}
	if ttft.Counts[2] != 1 || ttft.Counts[10] != 2 {
		t.Errorf("ttft cumulative counts %v, want 1 at 0.2 and 2 at 20", ttft.Counts)
	}
}
