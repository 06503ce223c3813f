package sched

import (
	"cmp"
	"slices"
)

// shapeID names a shape in a history's registry: ids are stable for the
// history's life, in the order shapes were first seen.
type shapeID int32

// shapeCount is one shape's arrivals in a bucket, or in since's answer.
type shapeCount struct {
	id shapeID
	n  int
}

// shapeInfo is what the registry keeps per shape: the shape, the lengths
// it stands for, and the capacity key of its prompt class, computed once.
type shapeInfo struct {
	s           shape
	in, want    int // fromOctave8 of the classes
	inKey       int // octave8(in): capacity's key for the prompt
	lastOut     int // int(out) of the last outKey ask
	lastOutKey  int // octave8(lastOut), valid when outKnown
	outKnown    bool
	capAt       uint64 // capacity's pass when capVal was read for capKey
	capKey      int64
	capVal      float64
	slot        int    // index in the newest bucket's counts, valid when slotOf == newest's serial
	slotOf      uint64 // serial of the bucket slot points into
	accumulated int    // since's scratch sum
}

// registry numbers every shape a history has seen and keeps them sorted by
// (in, want): estimate sums floats in that order, so that the same history
// prices the same however it was built, without sorting on every pass.
type registry struct {
	ids    grid[shapeID] // id+1 by (in, want) class; 0: not seen
	info   []shapeInfo
	sorted []shapeID // by (in, want)
}

// id returns s's id, registering it at its sorted place when new.
func (g *registry) id(s shape) shapeID {
	cell := g.ids.at(s.in, s.want)
	if *cell != 0 {
		return *cell - 1
	}
	id := shapeID(len(g.info))
	*cell = id + 1
	in, want := fromOctave8(s.in), fromOctave8(s.want)
	g.info = append(g.info, shapeInfo{s: s, in: in, want: want, inKey: octave8(in)})
	at, _ := slices.BinarySearchFunc(g.sorted, s, func(x shapeID, t shape) int { return compareShapes(g.info[x].s, t) })
	g.sorted = slices.Insert(g.sorted, at, id)
	return id
}

func compareShapes(a, b shape) int {
	return cmp.Or(cmp.Compare(a.in, b.in), cmp.Compare(a.want, b.want))
}

// outKey is octave8(int(out)) for shape id, remembered for the last
// int(out) asked (the expected output moves only as requests finish, and
// its whole tokens less often).
func (g *registry) outKey(id shapeID, out float64) int {
	x := &g.info[id]
	if n := int(out); !x.outKnown || x.lastOut != n {
		x.lastOut, x.lastOutKey, x.outKnown = n, octave8(n), true
	}
	return x.lastOutKey
}
