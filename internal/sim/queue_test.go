package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// The queue pops events in (at, seq) order: earliest first, and events at
// one instant in the order they were pushed. Pushes and pops interleave at
// random, with many events sharing an instant, against a sorted list.
func TestQueuePopsInTimeThenPushOrder(t *testing.T) {
	var q queue
	var want []event // pending, kept sorted by (at, seq)
	rng := rand.New(rand.NewPCG(3, 4))
	pushed := 0
	for n := range 20000 {
		if len(want) == 0 || rng.IntN(5) < 3 {
			e := event{at: int64(rng.IntN(40)), idx: pushed, kind: evStep}
			q.push(e)
			pushed++
			e.seq = q.seq
			want = append(want, e)
			slices.SortFunc(want, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
			continue
		}
		got, ok := q.pop()
		if !ok || got != want[0] {
			t.Fatalf("pop %d: got %+v (ok %v), want %+v", n, got, ok, want[0])
		}
		want = want[1:]
		if q.len() != len(want) {
			t.Fatalf("pop %d: %d left, want %d", n, q.len(), len(want))
		}
	}
	if _, ok := (&queue{}).pop(); ok {
		t.Fatal("an empty queue popped an event")
	}
}
