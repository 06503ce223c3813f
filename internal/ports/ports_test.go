package ports

import (
	"testing"
	"time"
)

func TestSeededPortsReplay(t *testing.T) {
	a, b := SeededIDs(7), SeededIDs(7)
	r1, r2 := NewSeededRng(7), NewSeededRng(7)
	for i := 0; i < 100; i++ {
		if x, y := a.NewID(), b.NewID(); x != y || len(x) != 32 {
			t.Fatalf("SeededIDs(7) draw %d: %q vs %q", i, x, y)
		}
		if x, y := r1.Uint64(), r2.Uint64(); x != y {
			t.Fatalf("NewSeededRng(7) draw %d: %d vs %d", i, x, y)
		}
	}
	if SeededIDs(7).NewID() == SeededIDs(8).NewID() {
		t.Fatal("different seeds gave the same first id")
	}
}

func TestSequentialIDs(t *testing.T) {
	g := Sequential("rec")
	for _, want := range []string{"rec-1", "rec-2", "rec-3"} {
		if got := g.NewID(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestFakeClockFiresInDeadlineOrder(t *testing.T) {
	start := time.Date(2026, 9, 10, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	late, early := f.NewTimer(2*time.Second), f.After(time.Second)
	stopped := f.NewTimer(time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	f.Advance(1500 * time.Millisecond)
	select {
	case at := <-early:
		if !at.Equal(start.Add(time.Second)) {
			t.Fatalf("early fired at %v", at)
		}
	default:
		t.Fatal("timer due at +1s did not fire at +1.5s")
	}
	select {
	case <-late.C():
		t.Fatal("timer due at +2s fired at +1.5s")
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	f.Advance(time.Second)
	if at := <-late.C(); !at.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("late fired at %v", at)
	}
	if got := f.Now(); !got.Equal(start.Add(2500 * time.Millisecond)) {
		t.Fatalf("Now = %v", got)
	}
}

// AfterFunc runs its function once its time comes on each clock, and not
// at all when stopped first.
func TestAfterFunc(t *testing.T) {
	fake := NewFake(time.Date(2026, 9, 10, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name    string
		clock   Clock
		advance func()
	}{
		{"fake", fake, func() { fake.Advance(time.Second) }},
		{"system", SystemClock(), func() {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fired := make(chan struct{}, 2)
			stopped := tc.clock.AfterFunc(10*time.Millisecond, func() { fired <- struct{}{} })
			if !stopped.Stop() {
				t.Fatal("Stop of a pending AfterFunc reported false")
			}
			tc.clock.AfterFunc(10*time.Millisecond, func() { fired <- struct{}{} })
			tc.advance()
			select {
			case <-fired:
			case <-time.After(5 * time.Second):
				t.Fatal("AfterFunc did not run within 5 s of its time")
			}
			select {
			case <-fired:
				t.Fatal("a stopped AfterFunc ran")
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}
