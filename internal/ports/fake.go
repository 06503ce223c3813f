package ports

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance or Set is called. Timers and
// tickers fire, in deadline order, during the call that moves time past
// them. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	seq     uint64
}

type fakeWaiter struct {
	at     time.Time
	period time.Duration // 0 for one-shot
	ch     chan time.Time
	fn     func() // AfterFunc's: run in its own goroutine instead of a send on ch
	seq    uint64
	active bool
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d, firing what falls due on the way.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("ports: Fake.Advance(%v): time does not run backwards", d))
	}
	f.Set(f.Now().Add(d))
}

// Set moves the clock to t (never backwards), firing what falls due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		panic(fmt.Sprintf("ports: Fake.Set(%v) is before now %v", t, f.now))
	}
	for {
		w := f.nextDue(t)
		if w == nil {
			break
		}
		f.now = w.at
		if w.fn != nil {
			go w.fn()
		} else {
			// A full buffered channel drops the tick, as time.Ticker does.
			select {
			case w.ch <- w.at:
			default:
			}
		}
		if w.period > 0 {
			w.at = w.at.Add(w.period)
		} else {
			w.active = false
		}
	}
	f.now = t
	f.prune()
}

// nextDue returns the earliest active waiter due at or before t.
func (f *Fake) nextDue(t time.Time) *fakeWaiter {
	var best *fakeWaiter
	for _, w := range f.waiters {
		if !w.active || w.at.After(t) {
			continue
		}
		if best == nil || w.at.Before(best.at) || (w.at.Equal(best.at) && w.seq < best.seq) {
			best = w
		}
	}
	return best
}

func (f *Fake) prune() {
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.active {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(f.waiters); i++ {
		f.waiters[i] = nil
	}
	f.waiters = kept
}

// add registers a waiter d from now: a send on its channel, or fn run in
// its own goroutine when fn is set (AfterFunc).
func (f *Fake) add(d, period time.Duration, fn func()) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	w := &fakeWaiter{at: f.now.Add(d), period: period, fn: fn, seq: f.seq, active: true}
	if fn == nil {
		w.ch = make(chan time.Time, 1)
	}
	if d <= 0 && period == 0 {
		if fn != nil {
			go fn()
		} else {
			w.ch <- f.now
		}
		w.active = false
		return w
	}
	f.waiters = append(f.waiters, w)
	return w
}

// After fires once when the fake clock has moved d past now.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.add(d, 0, nil).ch }

// NewTimer is a one-shot timer on the fake clock.
func (f *Fake) NewTimer(d time.Duration) Timer { return &fakeTimer{f: f, w: f.add(d, 0, nil)} }

// AfterFunc calls fn in its own goroutine when the fake clock has moved d
// past now (at once for d <= 0), unless stopped first.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return &fakeTimer{f: f, w: f.add(d, 0, fn)}
}

// NewTicker ticks every d on the fake clock; d must be positive.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("ports: non-positive ticker period")
	}
	return fakeTicker{&fakeTimer{f: f, w: f.add(d, d, nil)}}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.C() }
func (k fakeTicker) Stop()               { k.t.Stop() }

// Pending reports how many timers and tickers wait on the clock; tests use
// it to know a goroutine has parked before they advance time.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// NextDeadline reports the earliest pending deadline, if any.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ats := make([]time.Time, 0, len(f.waiters))
	for _, w := range f.waiters {
		if w.active {
			ats = append(ats, w.at)
		}
	}
	if len(ats) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	return ats[0], true
}

type fakeTimer struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.w.active
	t.w.active = false
	t.f.prune()
	return was
}

// Sequential returns ids prefix-1, prefix-2, … in call order. Safe for
// concurrent use; the order is then the order of the calls.
func Sequential(prefix string) IDGenerator { return &sequential{prefix: prefix} }

type sequential struct {
	mu     sync.Mutex
	prefix string
	n      uint64
}

func (s *sequential) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("%s-%d", s.prefix, s.n)
}

// SeededIDs returns 128-bit hex ids drawn from a seeded PCG: random-looking
// and reproducible.
func SeededIDs(seed uint64) IDGenerator { return &seededIDs{rng: NewSeededRng(seed)} }

type seededIDs struct {
	mu  sync.Mutex
	rng Rng
}

func (s *seededIDs) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%016x%016x", s.rng.Uint64(), s.rng.Uint64())
}
