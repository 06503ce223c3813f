package residency

import (
	"runtime"
	"testing"
)

// BenchmarkViewEvent is the router's upkeep per KV cache event in steady
// state: a view at 100k blocks takes one BlockStored and one BlockRemoved
// per change (2 events per op; ns/event is reported).
func BenchmarkViewEvent(b *testing.B) {
	v := NewView(DefaultViewLimit + 1)
	v.Known = true
	v.set = make(map[uint64]struct{}, DefaultViewLimit)
	for i := range uint64(DefaultViewLimit) {
		v.set[mix(i)] = struct{}{}
	}
	next, old := uint64(DefaultViewLimit), uint64(0)
	c := Change{Groups: map[string]GroupChange{Group: {Stored: make([]uint64, 1), Removed: make([]uint64, 1)}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := c.Groups[Group]
		g.Stored[0], g.Removed[0] = mix(next), mix(old)
		next, old = next+1, old+1
		c.Sequence = int64(i)
		if !v.ApplyChange(c) {
			b.Fatal("view lost")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/event")
}

// BenchmarkFleetMemory is the heap 64 engines' views take at their 100k
// block limit.
func BenchmarkFleetMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		views := make([]*View, 64)
		for e := range views {
			v := NewView(DefaultViewLimit)
			v.Known, v.set = true, make(map[uint64]struct{})
			for k := range uint64(DefaultViewLimit) {
				v.set[mix(uint64(e)<<32|k)] = struct{}{}
			}
			views[e] = v
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/64x100k")
		runtime.KeepAlive(views)
	}
}

// mix spreads test hashes like real block hashes (splitmix64).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
