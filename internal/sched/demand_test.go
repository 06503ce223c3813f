package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// since answers every shape of the buckets it sums once, in (in, want)
// order, with its count: the same as merging the window's arrivals by
// hand, through pruning, reused buckets and late reports.
func TestHistorySinceSortedCounts(t *testing.T) {
	type arrival struct {
		at float64
		s  shape
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var h history
	var seen []arrival
	now := 0.0
	for step := range 400 {
		now += rng.Float64() * 0.4
		at := now
		if step%17 == 0 {
			at -= 1.5 // a late report: credited to the newest bucket
		}
		s := shape{rng.IntN(6) * 3, rng.IntN(4)}
		h.add(at, 1, s)
		seen = append(seen, arrival{at: max(at, h.buckets[len(h.buckets)-1].start), s: s})
		if step%50 == 49 {
			h.prune(now - 10)
		}
		from := now - 4
		_, _, got := h.since(from)
		want := map[shape]int{}
		for _, b := range h.buckets {
			if b.start+bucketWidth <= from {
				continue
			}
			for _, a := range seen {
				if a.at >= b.start && a.at < b.start+bucketWidth {
					want[a.s]++
				}
			}
		}
		var order []shape
		for i, c := range got {
			s := h.shapes.info[c.id].s
			order = append(order, s)
			if c.n != want[s] {
				t.Fatalf("step %d: since counts %v %d times, want %d", step, s, c.n, want[s])
			}
			if i > 0 && compareShapes(order[i-1], s) >= 0 {
				t.Fatalf("step %d: since's shapes out of order: %v", step, order)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: since answered %d shapes, want %d", step, len(got), len(want))
		}
	}
	if !slices.IsSortedFunc(h.shapes.sorted, func(a, b shapeID) int { return compareShapes(h.shapes.info[a].s, h.shapes.info[b].s) }) {
		t.Error("the registry's sorted ids are out of order")
	}
}

// capacity's mean decode_rps is each instance's DecodeRPS at its own row
// and correction, summed in instance order, bit for bit: across runs of
// one class and correction, classes that come back after another, and a
// shape priced again at a new output (its preparation redone) or at the
// same one (reused).
func TestMeanDecodeRPSIsThePerInstanceMean(t *testing.T) {
	c := newCore(t, "a:decode", "b:decode", "c:decode", "d:decode", "e:prefill", "f:decode")
	other := row("x")
	other.TPOTSlope, other.TPOTIntercept = 2e-6, 0.015
	for k, i := range c.instances {
		i.correction = []float64{1, 1, 1.25, 1.25, 1.25, 0.8}[k]
		if k == 2 || k == 3 {
			i.prof, i.profClass = other, 99 // a second class between runs of the first
		}
	}
	k := c.ctl
	k.runs.group(c.instances, c.opt.TPOT)
	if len(k.runs.first) != 4 || len(k.runs.classEnd) != 3 {
		t.Fatalf("%d runs in %d class stretches, want 4 in 3", len(k.runs.first), len(k.runs.classEnd))
	}
	id := k.hist.shapes.id(shape{octave8(1000), octave8(200)})
	for _, out := range []float64{200, 200, 120.5, 7} {
		in := k.hist.shapes.info[id].in
		context, output := in+int(out/2), int(max(1, out))
		sum := 0.0
		for _, i := range c.instances {
			sum += i.prof.DecodeRPS(c.opt.TPOT, context, output, i.correction)
		}
		want := sum / float64(len(c.instances))
		if got := k.meanDecodeRPS(id, in, out); got != want || want <= 0 {
			t.Fatalf("out %g: meanDecodeRPS %v, the per-instance mean %v (want it above 0)", out, got, want)
		}
	}
}

// octave8's table answers as the logarithm does, across the table's edge.
func TestOctave8TableMatchesTheLogarithm(t *testing.T) {
	for n := -3; n < len(octaves)+100; n++ {
		if got, want := octave8(n), octave8Of(n); got != want {
			t.Fatalf("octave8(%d) = %d, round(8·log2) = %d", n, got, want)
		}
	}
	if octave8(1<<20) != 160 || octave8(1) != 0 || octave8(0) != 0 {
		t.Fatalf("octave8 of 2^20, 1, 0: %d %d %d, want 160 0 0", octave8(1<<20), octave8(1), octave8(0))
	}
}
