package metrics

import "github.com/prometheus/client_golang/prometheus"

// builder registers collectors on one registry. A duplicate name panics:
// that is a programming error caught by every test that calls New.
type builder struct{ reg *prometheus.Registry }

func (b builder) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	b.reg.MustRegister(c)
	return c
}

func (b builder) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	b.reg.MustRegister(g)
	return g
}

func (b builder) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	b.reg.MustRegister(c)
	return c
}

func (b builder) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	b.reg.MustRegister(g)
	return g
}

// histogram is an SLO-scaled histogram with the slo label fixed to scale.
func (b builder) histogram(name, help string, scale float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: Buckets(scale),
		ConstLabels: prometheus.Labels{"slo": SLOLabel(scale)},
	}, labels)
	b.reg.MustRegister(h)
	return h
}

// seed creates each label value at 0 so the series exist from start.
func seed(c *prometheus.CounterVec, values ...string) {
	for _, v := range values {
		c.WithLabelValues(v)
	}
}
