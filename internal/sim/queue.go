package sim

type evKind uint8

const (
	evArrival  evKind = iota + 1 // arrivals[idx] arrives
	evStep                       // engines[idx]'s step in flight completes
	evKV                         // reqs[idx]'s KV reached its decode engine
	evTick                       // monitor interval
	evDeadline                   // reqs[idx]'s deadline-queue wait ends
	evOutage                     // Outages[idx/2] begins (idx even) or ends
)

// event is one thing that happens at a virtual instant. Events at the same
// instant run in the order they were scheduled (seq), so a run never
// depends on heap internals. An event holds no pointers (what it is about
// is an index, a step in flight is its engine's): the heap moves events
// on every push and pop, and moving pointers costs write barriers while
// the collector marks.
type event struct {
	at   int64 // virtual nanoseconds
	seq  uint64
	idx  int
	kind evKind
}

// queue is a binary min-heap on (at, seq). Keys are unique (seq is), so
// the order events pop in is the order of their keys whatever the heap's
// layout.
type queue struct {
	h   []event
	seq uint64
}

// before orders events by (at, seq).
func before(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push sifts e up from a hole at the end: each parent on the way moves
// down once, e is written once.
func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&e, &h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// pop takes the first event, moving the last into the root's hole and
// sifting the hole down.
func (q *queue) pop() (event, bool) {
	if len(q.h) == 0 {
		return event{}, false
	}
	top := q.h[0]
	last := len(q.h) - 1
	x := q.h[last]
	q.h = q.h[:last]
	h := q.h
	i := 0
	for {
		m := 2*i + 1
		if m >= len(h) {
			break
		}
		if r := m + 1; r < len(h) && before(&h[r], &h[m]) {
			m = r
		}
		if !before(&h[m], &x) {
			break
		}
		h[i] = h[m]
		i = m
	}
	if i < len(h) {
		h[i] = x
	}
	return top, true
}

func (q *queue) len() int { return len(q.h) }
