package sched

import (
	"math/rand/v2"
	"testing"
)

// TestGridAnswersAsAMap writes and reads random cells in random order and
// holds every read to a map on the same pairs: zero before the first
// write, the last write after it, whatever rows grew in between.
func TestGridAnswersAsAMap(t *testing.T) {
	var g grid[int]
	want := map[[2]int]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		a, b := rng.IntN(120), rng.IntN(505)
		if got := *g.at(a, b); got != want[[2]int{a, b}] {
			t.Fatalf("step %d: cell (%d, %d) reads %d, a map reads %d", n, a, b, got, want[[2]int{a, b}])
		}
		if rng.IntN(3) == 0 {
			*g.at(a, b) = n + 1
			want[[2]int{a, b}] = n + 1
		}
	}
}
