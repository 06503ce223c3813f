package simengine

import (
	"net"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/enginemodel"
)

type evKind int

const (
	evToken evKind = iota + 1
	evFinished
	evAbort // the engine restarted or stopped: the request is gone
)

type evt struct {
	kind  evKind
	index int
}

// sink is one request's event queue. The step loop never blocks on a slow
// reader: it appends and nudges.
type sink struct {
	mu     sync.Mutex
	evs    []evt
	notify chan struct{}

	// Written under the engine mutex by the loop, for latency metrics.
	arrived, last time.Time
	tokens        int
}

func newSink(arrived time.Time) *sink {
	return &sink{notify: make(chan struct{}, 1), arrived: arrived}
}

func (s *sink) push(e evt) {
	s.mu.Lock()
	s.evs = append(s.evs, e)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events, or nil.
func (s *sink) take(buf []evt) []evt {
	s.mu.Lock()
	buf = append(buf[:0], s.evs...)
	s.evs = s.evs[:0]
	s.mu.Unlock()
	return buf
}

// lease is a finished prefill's KV, held for a consumer to pull.
type lease struct {
	modelID   string
	digest    uint64
	numTokens int
	blockIDs  []int
	expires   time.Time
}

// run is the continuous-batching step loop: plan a step, wait its duration
// on the clock, deliver its tokens, repeat. Idle, it waits for work or for
// the next lease to expire.
func (e *Engine) run() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		e.expireLeases()
		step, ok := e.model.Next()
		wait := e.stallOnce
		if ok {
			e.stallOnce = 0
			wait += e.jitterLocked(scale(step.Duration, e.faults.LatencyMultiplier), e.faults.JitterFraction)
			if len(step.Preempted) > 0 {
				e.met.add("vllm:num_preemptions_total", "", float64(len(step.Preempted)))
			}
		}
		leaseWait, hasLease := e.nextLeaseWait()
		e.mu.Unlock()
		if !ok {
			if !e.idle(leaseWait, hasLease) {
				return
			}
			continue
		}
		if !e.sleep(wait) {
			return
		}
		e.mu.Lock()
		e.deliver(e.model.Complete(step))
		e.mu.Unlock()
	}
}

func scale(d time.Duration, mult float64) time.Duration {
	if mult <= 0 || mult == 1 {
		return d
	}
	return time.Duration(float64(d) * mult)
}

func (e *Engine) idle(leaseWait time.Duration, hasLease bool) bool {
	if !hasLease {
		select {
		case <-e.wake:
			return true
		case <-e.ctx.Done():
			return false
		}
	}
	t := e.clock.NewTimer(leaseWait)
	defer t.Stop()
	select {
	case <-e.wake:
	case <-t.C():
	case <-e.ctx.Done():
		return false
	}
	return true
}

func (e *Engine) sleep(d time.Duration) bool {
	if d <= 0 {
		return e.ctx.Err() == nil
	}
	t := e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-e.ctx.Done():
		return false
	}
}

// deliver hands a completed step's events to their requests and updates
// the per-token metrics. Called with e.mu held.
func (e *Engine) deliver(evs []enginemodel.Event) {
	now := e.clock.Now()
	for _, ev := range evs {
		s := e.sinks[ev.ID]
		if s == nil {
			continue
		}
		switch ev.Kind {
		case enginemodel.Token:
			if ev.Index == 0 {
				e.prefixStoreLocked(ev.ID)
			}
			e.met.add("vllm:generation_tokens_total", "", 1)
			if s.tokens == 0 {
				e.met.observe("vllm:time_to_first_token_seconds", now.Sub(s.arrived).Seconds())
			} else {
				e.met.observe("vllm:inter_token_latency_seconds", now.Sub(s.last).Seconds())
			}
			s.tokens++
			s.last = now
			s.push(evt{kind: evToken, index: ev.Index})
		case enginemodel.Finished:
			s.push(evt{kind: evFinished})
		}
	}
	if e.pc != nil {
		e.pc.flush(float64(now.UnixNano()) / 1e9)
	}
}

// expireLeases frees the blocks of leases nobody pulled in time and
// counts them, as P's nixl_num_kv_expired_reqs does. Called with e.mu held.
func (e *Engine) expireLeases() {
	now := e.clock.Now()
	for id, l := range e.leases {
		if !now.Before(l.expires) {
			delete(e.leases, id)
			e.model.Release(l.modelID)
			e.met.add("vllm:nixl_num_kv_expired_reqs_total", "", 1)
			e.log.Warn("KV lease expired before the consumer read it", "request_id", id)
		}
	}
}

func (e *Engine) nextLeaseWait() (time.Duration, bool) {
	var first time.Time
	for _, l := range e.leases {
		if first.IsZero() || l.expires.Before(first) {
			first = l.expires
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(first.Sub(e.clock.Now()), time.Nanosecond), true
}

// submit queues a request on the model. It fails when the engine cannot
// ever fit it.
func (e *Engine) submit(r enginemodel.Request, s *sink) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.model.Add(r); err != nil {
		return err
	}
	e.sinks[r.ID] = s
	e.signal()
	return nil
}

// stop ends a request early. With keep, a prefill leg's blocks stay for
// its lease.
func (e *Engine) stop(id string, keep bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sinks, id)
	e.forgetPrefixLocked(id)
	if keep {
		e.model.Stop(id)
	} else {
		e.model.Release(id)
	}
	e.signal()
}

// hold puts a finished prefill leg's blocks under a lease and returns the
// block ids advertised to the consumer. ok is false when the engine
// restarted underneath the request.
func (e *Engine) hold(modelID string, digest uint64, numTokens, gen int) ([]int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sinks, modelID)
	if gen != e.generation {
		return nil, false
	}
	n := (numTokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize
	ids := make([]int, n)
	for i := range ids {
		ids[i] = e.nextBlock % max(1, e.cfg.KVCapacityTokens/e.cfg.BlockSize)
		e.nextBlock++
	}
	e.leases[modelID] = &lease{modelID: modelID, digest: digest, numTokens: numTokens, blockIDs: ids,
		expires: e.clock.Now().Add(e.cfg.LeaseDuration)}
	e.signal() // the idle loop re-arms its lease timer
	return ids, true
}

// done forgets a request that finished normally.
func (e *Engine) done(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sinks, id)
	e.forgetPrefixLocked(id)
}

func (e *Engine) scPort() int {
	return e.scLn.Addr().(*net.TCPAddr).Port
}
