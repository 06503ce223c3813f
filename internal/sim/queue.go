package sim

type evKind uint8

const (
	evArrival evKind = iota + 1 // arrivals[idx] arrives
	evStep                      // engines[idx]'s step in flight completes
	evKV                        // reqs[idx]'s KV reached its decode engine
	evTick                      // monitor interval
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

// queue is a binary min-heap on (at, seq).
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) less(i, j int) bool {
	if q.h[i].at != q.h[j].at {
		return q.h[i].at < q.h[j].at
	}
	return q.h[i].seq < q.h[j].seq
}

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	for i := len(q.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) pop() (event, bool) {
	if len(q.h) == 0 {
		return event{}, false
	}
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = event{}
	q.h = q.h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q.h) && q.less(l, m) {
			m = l
		}
		if r < len(q.h) && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top, true
}

func (q *queue) len() int { return len(q.h) }
