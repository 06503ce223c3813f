package diagnose

// A byte-level Aho–Corasick automaton over the matchers' needles: one pass
// over a line finds every needle it contains, so the cost per line does
// not grow with the number of matchers. This is what keeps a 100 MB log
// under a second: almost every line of a real log matches nothing.

type acAutomaton struct {
	next [][256]int32 // goto function with failure links folded in
	out  [][]int32    // needle ids ending at each state (including via failure links)
}

func newAC(needles []string) *acAutomaton {
	a := &acAutomaton{next: make([][256]int32, 1), out: make([][]int32, 1)}
	for i := range a.next[0] {
		a.next[0][i] = -1
	}
	for id, n := range needles {
		s := int32(0)
		for j := 0; j < len(n); j++ {
			c := n[j]
			if a.next[s][c] < 0 {
				a.next = append(a.next, [256]int32{})
				a.out = append(a.out, nil)
				ns := int32(len(a.next) - 1)
				for k := range a.next[ns] {
					a.next[ns][k] = -1
				}
				a.next[s][c] = ns
			}
			s = a.next[s][c]
		}
		a.out[s] = append(a.out[s], int32(id))
	}
	// Breadth-first: failure links, folded into the goto table.
	fail := make([]int32, len(a.next))
	queue := make([]int32, 0, len(a.next))
	for c := 0; c < 256; c++ {
		if t := a.next[0][c]; t < 0 {
			a.next[0][c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		a.out[s] = append(a.out[s], a.out[fail[s]]...)
		for c := 0; c < 256; c++ {
			t := a.next[s][c]
			if t < 0 {
				a.next[s][c] = a.next[fail[s]][c]
				continue
			}
			fail[t] = a.next[fail[s]][c]
			queue = append(queue, t)
		}
	}
	return a
}

// scan calls found for every needle occurrence in s (a needle may be
// reported more than once).
func (a *acAutomaton) scan(s string, found func(id int32)) {
	st := int32(0)
	next, out := a.next, a.out
	for i := 0; i < len(s); i++ {
		st = next[st][s[i]]
		if o := out[st]; len(o) > 0 {
			for _, id := range o {
				found(id)
			}
		}
	}
}
