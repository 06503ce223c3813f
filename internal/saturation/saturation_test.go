package saturation

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

func TestVerdict(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		delays []time.Duration
		lag    time.Duration
		median time.Duration
		sat    bool
	}{
		{"idle", nil, 0, 0, false},
		{"too few delays count for nothing", []time.Duration{900 * ms, 900 * ms, 900 * ms}, 0, 0, false},
		{"a slow median", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8}, 0, 5 * ms, false},
		{"a median at the limit", []time.Duration{300, 300, 300, 300, 100, 100, 100, 100}, 0, 300 * ms, true},
		{"lag at the limit", nil, 250 * ms, 0, true},
		{"lag under it", nil, 249 * ms, 0, false},
	} {
		clock := ports.NewFake(time.Unix(1000, 0))
		m := New(clock, 250*ms)
		for _, d := range tc.delays {
			if d < ms {
				d *= ms
			}
			m.Sized(d)
		}
		if got := m.Update(tc.lag, clock.Now()); got != tc.median {
			t.Errorf("%s: median %v, want %v", tc.name, got, tc.median)
		}
		sat, lag, median := m.Saturated()
		if sat != tc.sat || lag != tc.lag || median != tc.median {
			t.Errorf("%s: saturated %v (lag %v, median %v), want %v (%v, %v)", tc.name, sat, lag, median, tc.sat, tc.lag, tc.median)
		}
	}
}

// Delays older than the window stop counting, and their slots are freed.
func TestWindow(t *testing.T) {
	clock := ports.NewFake(time.Unix(1000, 0))
	m := New(clock, time.Second)
	for range Minimum {
		m.Sized(2 * time.Second)
	}
	clock.Advance(Window)
	if got := m.Update(0, clock.Now()); got != 2*time.Second {
		t.Fatalf("at the window's edge: median %v, want 2s", got)
	}
	clock.Advance(time.Millisecond)
	if got := m.Update(0, clock.Now()); got != 0 {
		t.Fatalf("past the window: median %v, want 0", got)
	}
	for i := range m.ring {
		if m.ring[i].Load() != 0 {
			t.Fatalf("slot %d still holds an expired delay", i)
		}
	}
	if sat, _, _ := m.Saturated(); sat {
		t.Error("saturated on expired delays")
	}
}

// More delays than the ring holds: the median is over the newest.
func TestRingKeepsTheNewest(t *testing.T) {
	clock := ports.NewFake(time.Unix(1000, 0))
	m := New(clock, time.Second)
	for range ringSize {
		m.Sized(time.Second)
	}
	for range ringSize/2 + 1 {
		m.Sized(time.Millisecond)
	}
	if got := m.Update(0, clock.Now()); got != time.Millisecond {
		t.Errorf("median %v, want 1ms", got)
	}
}

// A delay stamped after the tick's own time (another goroutine's clock
// read) counts as recent; the cap keeps a huge delay saturated.
func TestStampsAndCap(t *testing.T) {
	clock := ports.NewFake(time.Unix(1000, 0))
	m := New(clock, time.Second)
	before := clock.Now()
	clock.Advance(time.Second)
	for range Minimum {
		m.Sized(100 * time.Hour)
	}
	if got := m.Update(0, before); got < time.Second {
		t.Errorf("median %v, want at least the limit", got)
	}
}

// Sized from many goroutines while ticks run: no lock, no race (run with
// -race), every delay accounted.
func TestConcurrentSized(t *testing.T) {
	m := New(ports.SystemClock(), time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Duration, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.Run(ctx, func(_, median time.Duration) {
			select {
			case ticks <- median:
			default:
			}
		})
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				m.Sized(3 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if got := m.Update(0, time.Now()); got != 3*time.Millisecond {
		t.Errorf("median %v, want 3ms", got)
	}
	select {
	case <-ticks:
	case <-time.After(5 * time.Second):
		t.Error("no probe tick within 5s")
	}
	cancel()
	<-stopped
}
