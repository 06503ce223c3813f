package metrics

import (
	"math"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// BucketFractions are the histogram edges as fractions of a scale
// (runtime.md §6, operations.md §7.3). Each call returns a fresh slice.
func BucketFractions() []float64 {
	return []float64{0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.5, 3.0, 10.0}
}

// Buckets returns the upper bounds for a histogram whose scale is an SLO
// budget in seconds: round(f × scale, 6) for every fraction (+Inf is
// implicit). Scaling by the SLO keeps the bucket around the target
// precise whatever the target is.
func Buckets(scale float64) []float64 {
	fr := BucketFractions()
	out := make([]float64, len(fr))
	for i, f := range fr {
		out[i] = math.Round(f*scale*1e6) / 1e6
	}
	return out
}

// Scales are the histogram scales a fleet implies, in seconds.
type Scales struct {
	TTFT, TPOT, QueueWait, Seat, E2E float64
}

// E2ETokens is the output length whose SLO budget scales the end-to-end
// histogram: slo.ttft_s + E2ETokens × slo.tpot_s, the whole-response time
// a request of that length may take within both targets.
const E2ETokens = 256

// ScalesOf derives the scales: TTFT and seat from slo.ttft_s, TPOT from
// slo.tpot_s, queue wait from serving.queue_timeout_s or, when that is 0
// (no queue), slo.ttft_s; end to end from the SLO budget of E2ETokens
// output tokens.
func ScalesOf(cfg *fleet.Config) Scales {
	q := cfg.Serving.QueueTimeoutS
	if q <= 0 {
		q = cfg.SLO.TTFT
	}
	return Scales{TTFT: cfg.SLO.TTFT, TPOT: cfg.SLO.TPOT, QueueWait: q, Seat: cfg.SLO.TTFT,
		E2E: math.Round((cfg.SLO.TTFT+E2ETokens*cfg.SLO.TPOT)*1e6) / 1e6}
}

// SLOLabel formats a scale for the histograms' slo label (%g style:
// 2 → "2", 0.05 → "0.05"), so dashboards can group by configuration.
func SLOLabel(scale float64) string { return strconv.FormatFloat(scale, 'g', -1, 64) }
