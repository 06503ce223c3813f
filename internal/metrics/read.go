package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Histogram is one histogram's cumulative state: Counts[i] requests took
// at most Bounds[i] seconds; Count and Sum cover all of them (+Inf too).
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// Latency reads the TTFT and TPOT histograms, for the live dashboard's
// windowed percentiles (it differences two reads).
func (m *Metrics) Latency() (ttft, tpot Histogram) {
	return read(m.ttft), read(m.tpot)
}

func read(o prometheus.Observer) Histogram {
	var d dto.Metric
	if c, ok := o.(prometheus.Metric); !ok || c.Write(&d) != nil || d.Histogram == nil {
		return Histogram{}
	}
	h := d.Histogram
	out := Histogram{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
	for _, b := range h.Bucket {
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, b.GetCumulativeCount())
	}
	return out
}
