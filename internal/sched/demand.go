package sched

import (
	"cmp"
	"math"
	"slices"
)

// The demand model prices recent arrivals in engines' worth of work: how
// many prefill engines and how many decode engines the offered load needs
// at the SLO. Arrivals are kept in one-second buckets of request shapes,
// so one evaluation costs O(buckets × distinct shapes), not O(requests).

const bucketWidth = 1.0 // seconds

// shape is a request's length class: prompt and output cap rounded to an
// eighth of an octave, so nearby lengths share one capacity computation.
type shape struct{ in, want int }

func octave8(n int) int {
	if n <= 0 {
		return 0
	}
	return int(math.Round(8 * math.Log2(float64(n))))
}

func fromOctave8(k int) int {
	if k == 0 {
		return 0
	}
	return int(math.Round(math.Exp2(float64(k) / 8)))
}

type demandBucket struct {
	start    float64
	arrivals int
	prefillS float64 // Σ fleet-mean prefill_time of the arrivals
	shapes   map[shape]int
}

// history is the ring of arrival buckets within the demand window.
type history struct {
	buckets []*demandBucket // oldest first
	merged  map[shape]int   // since's answer, reused by the next call
	order   []shape         // estimate's sorted shapes, reused likewise
}

func (h *history) add(at float64, price float64, s shape) {
	start := math.Floor(at/bucketWidth) * bucketWidth
	n := len(h.buckets)
	var b *demandBucket
	if n > 0 && h.buckets[n-1].start == start {
		b = h.buckets[n-1]
	} else if n > 0 && h.buckets[n-1].start > start {
		// A late report (sizing finished after newer arrivals): credit it to
		// the newest bucket rather than reorder the ring.
		b = h.buckets[n-1]
	} else {
		b = &demandBucket{start: start, shapes: map[shape]int{}}
		h.buckets = append(h.buckets, b)
	}
	b.arrivals++
	b.prefillS += price
	b.shapes[s]++
}

// prune drops buckets that ended before keepFrom.
func (h *history) prune(keepFrom float64) {
	k := 0
	for k < len(h.buckets) && h.buckets[k].start+bucketWidth <= keepFrom {
		h.buckets[k] = nil
		k++
	}
	h.buckets = h.buckets[k:]
}

// since sums the buckets that start at or after from. The shapes map is
// valid until the next call.
func (h *history) since(from float64) (arrivals int, prefillS float64, shapes map[shape]int) {
	if h.merged == nil {
		h.merged = map[shape]int{}
	}
	clear(h.merged)
	shapes = h.merged
	for _, b := range h.buckets {
		if b.start+bucketWidth <= from {
			continue
		}
		arrivals += b.arrivals
		prefillS += b.prefillS
		for s, n := range b.shapes {
			shapes[s] += n
		}
	}
	return arrivals, prefillS, shapes
}

// outputs learns how much of its cap a request delivers, for the decode
// demand of requests still to come.
type outputs struct {
	fraction      float64 // EWMA of delivered/cap over capped requests
	uncappedMean  float64 // EWMA of delivered tokens of uncapped requests
	capped, plain int
}

func (o *outputs) observe(want, got int) {
	const a = 0.05
	if want > 0 {
		f := math.Min(1, float64(got)/float64(want))
		if o.capped == 0 {
			o.fraction = f
		} else {
			o.fraction = (1-a)*o.fraction + a*f
		}
		o.capped++
		return
	}
	if o.plain == 0 {
		o.uncappedMean = float64(got)
	} else {
		o.uncappedMean = (1-a)*o.uncappedMean + a*float64(got)
	}
	o.plain++
}

// expected is the output a request of cap want is expected to deliver;
// ok is false when nothing is known (an uncapped request before any
// uncapped request finished).
func (o *outputs) expected(want int) (float64, bool) {
	if want > 0 {
		if o.capped == 0 {
			return float64(want), true
		}
		return math.Max(1, o.fraction*float64(want)), true
	}
	if o.plain == 0 {
		return 0, false
	}
	return math.Max(1, o.uncappedMean), true
}

// demand is the offered load over one horizon, in engines' worth.
type demand struct {
	arrivals int
	prefill  float64 // prefill engines needed
	decode   float64 // decode engines needed at the TPOT target
	complete bool
}

// estimate prices the arrivals since from over span seconds.
func (k *controller) estimate(from, span float64) demand {
	arrivals, prefillS, shapes := k.hist.since(from)
	d := demand{arrivals: arrivals, prefill: prefillS / span, complete: true}
	k.hist.order = sortedShapes(k.hist.order[:0], shapes)
	for _, s := range k.hist.order {
		n := shapes[s]
		out, ok := k.outputs.expected(fromOctave8(s.want))
		capacity := 0.0
		if ok {
			capacity = k.capacity(fromOctave8(s.in), out)
		}
		if capacity <= 0 {
			d.complete = false
			continue
		}
		d.decode += float64(n) / (span * capacity)
	}
	d.decode = math.Max(d.decode, k.residentDemand())
	return d
}

// sortedShapes appends the shapes of m to out in (in, want) order: summing floats in
// map order would make the same history price differently run to run.
func sortedShapes(out []shape, m map[shape]int) []shape {
	for s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b shape) int { return cmp.Or(cmp.Compare(a.in, b.in), cmp.Compare(a.want, b.want)) })
	return out
}

// capacity is the fleet-mean decode request rate one engine sustains at
// the TPOT target for this shape (decode_rps at context in + out/2).
func (k *controller) capacity(in int, out float64) float64 {
	key := [2]int{octave8(in), octave8(int(out))}
	if v, ok := k.capCache[key]; ok {
		return v
	}
	c := k.c
	sum, n := 0.0, 0
	var prev *Instance
	rps := 0.0
	for _, i := range c.instances {
		if prev == nil || i.profClass != prev.profClass || i.correction != prev.correction {
			rps = i.prof.DecodeRPS(c.opt.TPOT, in+int(out/2), int(math.Max(1, out)), i.correction)
		}
		sum += rps // the same value in the same order as evaluating each instance
		prev = i
		n++
	}
	v := sum / float64(max(1, n))
	k.capCache[key] = v
	return v
}

// residentDemand is the window mean of decode engines' worth held by
// resident decode work (sampled each monitor pass).
func (k *controller) residentDemand() float64 {
	if len(k.residency) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range k.residency {
		s += v.engines
	}
	return s / float64(len(k.residency))
}

type residencySample struct{ at, engines float64 }

// sampleResidency records how many decode engines the resident decode work
// fills: KV against the TPOT-feasible batch, requests against the request
// limit, whichever binds.
func (k *controller) sampleResidency(now float64) {
	c := k.c
	total := 0.0
	for _, i := range c.instances {
		if !i.Live || len(i.decode) == 0 {
			continue
		}
		mt := i.prof.MT(c.opt.TPOT/i.correction, len(i.decode))
		byKV := 0.0
		if mt > 0 && !math.IsInf(mt, 1) {
			byKV = float64(i.decodeTokens) / mt
		}
		byReq := 0.0
		if lim := i.prof.DecodeRequestLimit(max(1, i.decodeTokens/len(i.decode))); lim > 0 {
			byReq = float64(len(i.decode)) / float64(lim)
		}
		total += math.Max(byKV, byReq)
	}
	k.residency = append(k.residency, residencySample{at: now, engines: total})
	cut := 0
	for cut < len(k.residency) && k.residency[cut].at < now-k.cfg.Reactive.WindowS {
		cut++
	}
	k.residency = k.residency[cut:]
}
