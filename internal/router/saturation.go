package router

import (
	"sort"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/units"
)

// saturation watches for a router too busy to serve well (runtime.md
// §1.3): the lateness of a 50 ms probe tick (goroutines starved of CPU)
// and the median time recent requests took to be sized. When either
// reaches a quarter of the TTFT target, new requests are refused with 429
// rather than queued into certain SLO misses.
type saturation struct {
	mu     sync.Mutex
	lag    time.Duration
	median time.Duration  // of sizing, recomputed every probe tick
	sizing []sizingSample // last 2 s
}

type sizingSample struct {
	at    time.Time
	delay time.Duration
}

const (
	lagProbe      = 50 * time.Millisecond
	sizingWindow  = 2 * time.Second
	sizingMinimum = 8
)

// probeLag runs until stop: each tick records how late it fired.
func (r *Router) probeLag() {
	defer r.bg.Done()
	t := r.clock.NewTicker(lagProbe)
	defer t.Stop()
	next := r.clock.Now().Add(lagProbe)
	for {
		select {
		case <-r.bgCtx.Done():
			return
		case now := <-t.C():
			late := max(0, now.Sub(next))
			if n := r.clock.Now(); n.Sub(now) > late {
				late = n.Sub(now) // the tick itself sat in the channel
			}
			next = now.Add(lagProbe)
			median := r.sat.update(late, r.clock.Now())
			r.metrics.LoopLag.Set(late.Seconds())
			r.metrics.SizingDelay.Set(median.Seconds())
		}
	}
}

// update records the probe's lateness and recomputes the sizing median
// over the last 2 s, off the request path.
func (s *saturation) update(late time.Duration, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = late
	cut := 0
	for cut < len(s.sizing) && now.Sub(s.sizing[cut].at) > sizingWindow {
		cut++
	}
	s.sizing = s.sizing[cut:]
	s.median = 0
	if len(s.sizing) >= sizingMinimum {
		d := make([]time.Duration, len(s.sizing))
		for i, x := range s.sizing {
			d[i] = x.delay
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		s.median = d[len(d)/2]
	}
	return s.median
}

// sized records how long a request took to be sized.
func (r *Router) sized(delay time.Duration) {
	s := &r.sat
	s.mu.Lock()
	s.sizing = append(s.sizing, sizingSample{r.clock.Now(), delay})
	s.mu.Unlock()
}

// saturated reports whether the router should refuse new work, and the
// two signals as of the last probe tick.
func (r *Router) saturated() (bool, time.Duration, time.Duration) {
	s := &r.sat
	s.mu.Lock()
	lag, median := s.lag, s.median
	s.mu.Unlock()
	limit := units.Seconds(r.cfg.SLO.SaturationThreshold())
	return lag >= limit || median >= limit, lag, median
}

// lagSeconds is the event-loop lag the last probe tick measured.
func (r *Router) lagSeconds() float64 {
	_, lag, _ := r.saturated()
	return lag.Seconds()
}
