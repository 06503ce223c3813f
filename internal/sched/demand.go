package sched

import (
	"math"

	"github.com/narwhal-go/narwhal/internal/profile"
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
	if n > 0 && n < len(octaves) {
		return int(octaves[n])
	}
	return octave8Of(n)
}

// octave8Of is octave8 computed: round(8·log2 n).
func octave8Of(n int) int {
	if n <= 0 {
		return 0
	}
	return int(math.Round(8 * math.Log2(float64(n))))
}

// octaves holds octave8Of(n) for the lengths most requests have, filled
// once at start and only read after: every arrival and every shape's
// expected output would otherwise take a logarithm.
var octaves = func() (t [1 << 13]int16) {
	for n := range t {
		t[n] = int16(octave8Of(n))
	}
	return t
}()

func fromOctave8(k int) int {
	if k == 0 {
		return 0
	}
	return int(math.Round(math.Exp2(float64(k) / 8)))
}

type demandBucket struct {
	start    float64
	serial   uint64 // the history's count of buckets opened when this one was
	arrivals int
	prefillS float64 // Σ fleet-mean prefill_time of the arrivals
	counts   []shapeCount
}

// history is the ring of arrival buckets within the demand window.
type history struct {
	buckets []*demandBucket // oldest first
	spare   []*demandBucket // pruned buckets, for reuse
	opened  uint64
	shapes  registry
	merged  []shapeCount // since's answer, reused by the next call
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
		b = h.open(start)
	}
	b.arrivals++
	b.prefillS += price
	id := h.shapes.id(s)
	x := &h.shapes.info[id]
	if x.slotOf != b.serial {
		x.slot, x.slotOf = len(b.counts), b.serial
		b.counts = append(b.counts, shapeCount{id: id})
	}
	b.counts[x.slot].n++
}

// open appends a fresh bucket starting at start, reusing a pruned one.
func (h *history) open(start float64) *demandBucket {
	h.opened++
	var b *demandBucket
	if n := len(h.spare); n > 0 {
		b, h.spare = h.spare[n-1], h.spare[:n-1]
		*b = demandBucket{counts: b.counts[:0]}
	} else {
		b = &demandBucket{}
	}
	b.start, b.serial = start, h.opened
	h.buckets = append(h.buckets, b)
	return b
}

// prune drops buckets that ended before keepFrom.
func (h *history) prune(keepFrom float64) {
	k := 0
	for k < len(h.buckets) && h.buckets[k].start+bucketWidth <= keepFrom {
		h.spare = append(h.spare, h.buckets[k])
		h.buckets[k] = nil
		k++
	}
	h.buckets = h.buckets[k:]
}

// since sums the buckets that start at or after from. The shapes come in
// (in, want) order, each once with its count; the slice is valid until
// the next call.
func (h *history) since(from float64) (arrivals int, prefillS float64, shapes []shapeCount) {
	info := h.shapes.info
	for _, b := range h.buckets {
		if b.start+bucketWidth <= from {
			continue
		}
		arrivals += b.arrivals
		prefillS += b.prefillS
		for _, c := range b.counts {
			info[c.id].accumulated += c.n
		}
	}
	shapes = h.merged[:0]
	for _, id := range h.shapes.sorted {
		if n := info[id].accumulated; n > 0 {
			shapes = append(shapes, shapeCount{id: id, n: n})
			info[id].accumulated = 0
		}
	}
	h.merged = shapes
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
		return max(1, o.fraction*float64(want)), true
	}
	if o.plain == 0 {
		return 0, false
	}
	return max(1, o.uncappedMean), true
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
	k.runs.group(k.c.instances, k.c.opt.TPOT)
	for _, sc := range shapes {
		x := &k.hist.shapes.info[sc.id]
		out, ok := k.outputs.expected(x.want)
		capacity := 0.0
		if ok {
			capacity = k.capacity(sc.id, out)
		}
		if capacity <= 0 {
			d.complete = false
			continue
		}
		d.decode += float64(sc.n) / (span * capacity)
	}
	d.decode = math.Max(d.decode, k.residentDemand())
	return d
}

// capacity is the fleet-mean decode request rate one engine sustains at
// the TPOT target for shape id's prompt and out expected output tokens
// (decode_rps at context in + out/2). Within one monitor pass the first
// value priced for a key (the prompt's and the output's octave classes)
// answers every later ask for it; the shape remembers its last answer so
// that only a new key goes to the pass's table.
func (k *controller) capacity(id shapeID, out float64) float64 {
	x := &k.hist.shapes.info[id]
	outKey := k.hist.shapes.outKey(id, out)
	key := int64(x.inKey)<<32 | int64(uint32(outKey))
	if x.capAt != 0 && x.capAt == k.capPass && x.capKey == key {
		return x.capVal
	}
	e := k.capCache.at(x.inKey, outKey)
	if e.pass != k.capPass+1 {
		e.pass, e.v = k.capPass+1, k.meanDecodeRPS(id, x.in, out)
	}
	x.capAt, x.capKey, x.capVal = k.capPass, key, e.v
	return e.v
}

// capEntry is a capacity priced in monitor pass pass-1 (0: never).
type capEntry struct {
	pass uint64
	v    float64
}

// meanDecodeRPS is decode_rps for an in-token prompt and out output
// tokens averaged over the instances, in their order. Instances of one
// profile class share the shape's preparation; of one class and
// correction (a run, as estimate grouped them), the value.
func (k *controller) meanDecodeRPS(id shapeID, in int, out float64) float64 {
	context, output := in+int(out/2), int(max(1, out))
	g := &k.runs
	a := 0
	for _, b := range g.classEnd { // runs a..b-1 share a profile class
		shape := k.decodeShape(id, g.first[a], context, output)
		shape.RPSEach(k.c.opt.TPOT, g.corr[a:b], g.budget[a:b], g.rps[a:b])
		a = b
	}
	sum := 0.0
	for r, n := range g.n {
		for range n {
			sum += g.rps[r] // the same value in the same order as evaluating each instance
		}
	}
	return sum / float64(max(1, len(k.c.instances)))
}

// preparedShape is a shape's DecodeShape for one profile class at one
// (context, output), as last prepared.
type preparedShape struct {
	set             bool
	class           int
	context, output int
	shape           profile.DecodeShape
}

// decodeShape is i's row's DecodeShape(context, output) for shape id. A
// shape's context and output move only with its expected output, so an
// evaluation mostly finds the preparation an earlier one made (for the
// class asked last: a fleet of several classes prepares afresh when the
// class changes). The preparation is a function of the row, which
// instances of one class share, and of (context, output).
func (k *controller) decodeShape(id shapeID, i *Instance, context, output int) *profile.DecodeShape {
	if n := len(k.hist.shapes.info); len(k.prepared) < n {
		k.prepared = append(k.prepared, make([]preparedShape, n-len(k.prepared))...)
	}
	p := &k.prepared[id]
	if !p.set || p.class != i.profClass || p.context != context || p.output != output {
		*p = preparedShape{set: true, class: i.profClass, context: context, output: output,
			shape: i.prof.DecodeShape(context, output)}
	}
	return &p.shape
}

// decodeRuns are a fleet's instances in order, cut into runs of equal
// profile class and correction, which price every shape alike: estimate's
// scratch for capacity.
type decodeRuns struct {
	first  []*Instance // each run's first instance
	n      []int       // instances in each run
	corr   []float64   // each run's correction
	budget []float64   // TPOT ÷ correction: the budget it leaves
	rps    []float64   // meanDecodeRPS's scratch, one per run
	// classEnd ends each stretch of runs of one profile class: the first
	// stretch is runs [0, classEnd[0]), the next [classEnd[0], classEnd[1]).
	classEnd []int
}

// group cuts instances into runs; a NaN correction is a run of its own,
// as it equals nothing.
func (g *decodeRuns) group(instances []*Instance, tpot float64) {
	g.first, g.n, g.corr, g.budget = g.first[:0], g.n[:0], g.corr[:0], g.budget[:0]
	for _, i := range instances {
		if r := len(g.first) - 1; r >= 0 && i.profClass == g.first[r].profClass && i.correction == g.corr[r] {
			g.n[r]++
			continue
		}
		g.first, g.n = append(g.first, i), append(g.n, 1)
		g.corr, g.budget = append(g.corr, i.correction), append(g.budget, tpot/i.correction)
	}
	g.rps = append(g.rps[:0], g.corr...) // sized to the runs; meanDecodeRPS overwrites
	g.classEnd = g.classEnd[:0]
	for r := range g.first {
		if r+1 == len(g.first) || g.first[r+1].profClass != g.first[r].profClass {
			g.classEnd = append(g.classEnd, r+1)
		}
	}
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
