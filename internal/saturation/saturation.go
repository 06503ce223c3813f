// Package saturation watches for a router too busy to serve well
// (runtime.md §1.3): the lateness of a 50 ms probe tick (goroutines
// starved of CPU) and the median time recent requests took to be sized.
// When either reaches the limit (a quarter of the TTFT target,
// fleet.SLO.SaturationThreshold), new requests are refused with 429 rather
// than queued into certain SLO misses.
//
// The request path only records a sizing delay (Sized) and reads the
// verdict (Saturated): both are atomic operations, no lock. The probe
// tick does the rest off the request path.
package saturation

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

const (
	// Probe is the probe tick's period.
	Probe = 50 * time.Millisecond
	// Window is how far back sizing delays count.
	Window = 2 * time.Second
	// Minimum is how many sizing delays the window needs before their
	// median counts.
	Minimum = 8
	// ringSize bounds the sizing delays the window holds: the median is
	// over the last ringSize of them when more arrive within Window.
	ringSize = 8192
)

// A sample is one word: present bit, the recording time in milliseconds
// since the monitor started (31 bits, compared modulo 2^31; every tick
// clears what is older than Window, so none lives long enough to wrap),
// and the delay in microseconds (32 bits, capped).
const (
	present   = uint64(1) << 63
	stampMask = uint64(1)<<31 - 1
	delayMask = uint64(1)<<32 - 1
)

// Monitor holds the two signals and the recent sizing delays.
type Monitor struct {
	clock  ports.Clock
	start  time.Time
	limit  time.Duration
	lag    atomic.Int64 // ns: the last probe tick's lateness
	median atomic.Int64 // ns: of sizing, recomputed every probe tick
	next   atomic.Uint64
	ring   [ringSize]atomic.Uint64 // sizing samples; 0 is an empty slot
}

// New is a monitor whose verdict is saturated when either signal reaches
// limit.
func New(clock ports.Clock, limit time.Duration) *Monitor {
	return &Monitor{clock: clock, start: clock.Now(), limit: limit}
}

// Sized records how long a request took to be sized.
func (m *Monitor) Sized(delay time.Duration) {
	us := min(uint64(max(0, delay.Microseconds())), delayMask)
	v := present | m.stamp(m.clock.Now())<<32 | us
	m.ring[(m.next.Add(1)-1)%ringSize].Store(v)
}

// Saturated reports whether the router should refuse new work, and the
// two signals as of the last probe tick.
func (m *Monitor) Saturated() (sat bool, lag, median time.Duration) {
	lag, median = m.Lag(), time.Duration(m.median.Load())
	return lag >= m.limit || median >= m.limit, lag, median
}

// Lag is the lateness the last probe tick measured.
func (m *Monitor) Lag() time.Duration { return time.Duration(m.lag.Load()) }

// Update records the probe's lateness and recomputes the sizing median
// over the last Window (none below Minimum delays), clearing older ones.
func (m *Monitor) Update(late time.Duration, now time.Time) time.Duration {
	m.lag.Store(int64(late))
	at := m.stamp(now)
	var delays []time.Duration
	for i := range m.ring {
		v := m.ring[i].Load()
		if v == 0 {
			continue
		}
		if age(at, v) > Window {
			m.ring[i].CompareAndSwap(v, 0)
			continue
		}
		delays = append(delays, time.Duration(v&delayMask)*time.Microsecond)
	}
	median := time.Duration(0)
	if len(delays) >= Minimum {
		slices.Sort(delays)
		median = delays[len(delays)/2]
	}
	m.median.Store(int64(median))
	return median
}

// stamp is t in milliseconds since the monitor started, modulo 2^31.
func (m *Monitor) stamp(t time.Time) uint64 {
	return uint64(t.Sub(m.start).Milliseconds()) & stampMask
}

// age is how long before the stamp at sample v was recorded; a sample
// stamped after at (a clock read late on another goroutine) is age 0.
func age(at, v uint64) time.Duration {
	d := (at - (v>>32)&stampMask) & stampMask
	if d > stampMask/2 {
		return 0
	}
	return time.Duration(d) * time.Millisecond
}

// Run fires the probe tick every Probe until ctx ends: each tick records
// how late it fired and recomputes the median, then tells tick both (the
// router mirrors them into its gauges).
func (m *Monitor) Run(ctx context.Context, tick func(lag, median time.Duration)) {
	t := m.clock.NewTicker(Probe)
	defer t.Stop()
	next := m.clock.Now().Add(Probe)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			late := max(0, now.Sub(next))
			if n := m.clock.Now(); n.Sub(now) > late {
				late = n.Sub(now) // the tick itself sat in the channel
			}
			next = now.Add(Probe)
			tick(late, m.Update(late, m.clock.Now()))
		}
	}
}
