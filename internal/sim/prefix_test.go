package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// refLRU is a block cache written the plainest way: keys in LRU order,
// least recently used first.
type refLRU struct{ order []blockKey }

func (r *refLRU) touch(k blockKey) bool {
	i := slices.Index(r.order, k)
	if i < 0 {
		return false
	}
	r.order = append(slices.Delete(r.order, i, i+1), k)
	return true
}

func (r *refLRU) resident(keys []blockKey, inputLen, bs int, touch bool) int {
	n := 0
	for ; n < min(len(keys), max(inputLen-1, 0)/bs); n++ {
		if !slices.Contains(r.order, keys[n]) {
			break
		}
		if touch {
			r.touch(keys[n])
		}
	}
	return n * bs
}

func (r *refLRU) store(keys []blockKey, room int) {
	for _, k := range keys {
		if !r.touch(k) {
			r.order = append(r.order, k)
		}
	}
	if over := len(r.order) - max(room, 0); over > 0 {
		r.order = slices.Delete(r.order, 0, over)
	}
}

// The simulator's block cache hits, refreshes and evicts exactly as a
// plain LRU of blocks does, over prompts that share system prompts and
// session histories, with namespaces emptied and refilled.
func TestSimCacheIsAnLRU(t *testing.T) {
	const bs = 16
	rng := rand.New(rand.NewPCG(3, 4))
	c, ref := newSimCache(bs), &refLRU{}
	evicted := 0
	for step := range 3000 {
		a := Arrival{InputLen: 1 + rng.IntN(40*bs), System: rng.IntN(3), SystemLen: bs * rng.IntN(8), Session: rng.IntN(12)}
		keys := blockKeys(a, step, bs)
		touch := rng.IntN(2) == 0
		if got, want := c.resident(keys, a.InputLen, touch), ref.resident(keys, a.InputLen, bs, touch); got != want {
			t.Fatalf("step %d: resident %d tokens, want %d", step, got, want)
		}
		if rng.IntN(3) > 0 {
			room := rng.IntN(120)
			before := len(ref.order) + len(keys)
			c.store(keys, room)
			ref.store(keys, room)
			if before > room {
				evicted++
			}
		}
		if c.size != len(ref.order) {
			t.Fatalf("step %d: %d blocks resident, want %d", step, c.size, len(ref.order))
		}
	}
	if evicted == 0 {
		t.Fatal("nothing was evicted: the run does not exercise the LRU")
	}
	for x := c.nodes[0].next; x != 0; x = c.nodes[x].next { // the ring's order is the reference's
		n := c.nodes[x]
		if k := ref.order[0]; n.sp.ns != k.ns || n.j != k.j {
			t.Fatalf("LRU order differs at block %v of namespace %x: want %v", n.j, n.sp.ns, k)
		}
		ref.order = ref.order[1:]
	}
}
