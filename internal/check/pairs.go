package check

import "github.com/narwhal-go/narwhal/internal/fleet"

// Pair is a directed KV probe: prefill on Src, decode on Dst.
type Pair struct{ Src, Dst string }

// CanProduce: a decode-pinned engine never prefills for a peer.
func CanProduce(e fleet.Engine) bool { return !(e.Pin && e.Role == fleet.Decode) }

// CanConsume: a prefill-pinned engine never decodes a peer's KV.
func CanConsume(e fleet.Engine) bool { return !(e.Pin && e.Role == fleet.Prefill) }

// Mesh is every ordered (producer, consumer) pair of distinct engines, in
// configuration order.
func Mesh(engines []fleet.Engine) []Pair {
	var out []Pair
	for _, a := range engines {
		if !CanProduce(a) {
			continue
		}
		for _, b := range engines {
			if a.IID != b.IID && CanConsume(b) {
				out = append(out, Pair{a.IID, b.IID})
			}
		}
	}
	return out
}

// Ring covers every producer and every consumer with about one pair each:
// producers in configuration order take the next consumer from a rotating
// cursor that skips themselves; a consumer still uncovered then gets the
// first producer other than itself.
func Ring(engines []fleet.Engine) []Pair {
	var prods, cons []fleet.Engine
	for _, e := range engines {
		if CanProduce(e) {
			prods = append(prods, e)
		}
		if CanConsume(e) {
			cons = append(cons, e)
		}
	}
	var out []Pair
	covered := map[string]bool{}
	cursor := 0
	for _, p := range prods {
		for tries := 0; tries < len(cons); tries++ {
			c := cons[cursor%len(cons)]
			cursor++
			if c.IID != p.IID {
				out = append(out, Pair{p.IID, c.IID})
				covered[c.IID] = true
				break
			}
		}
	}
	for _, c := range cons {
		if covered[c.IID] {
			continue
		}
		for _, p := range prods {
			if p.IID != c.IID {
				out = append(out, Pair{p.IID, c.IID})
				break
			}
		}
	}
	return out
}
