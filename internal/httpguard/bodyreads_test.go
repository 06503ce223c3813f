package httpguard

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent Takes and Dones on a few addresses never hold more than the
// limit at once, and leave nothing behind: the counters retire and leave
// the map when they reach zero, with no lock to serialise them.
func TestBodyReadsConcurrent(t *testing.T) {
	const limit, workers, rounds = 2, 8, 2000
	var b BodyReads
	ips := []string{"a", "b", "c"}
	var held [3]atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := (w + i) % len(ips)
				if !b.Take(ips[k], limit) {
					continue
				}
				if held[k].Add(1) > limit {
					over.Add(1)
				}
				held[k].Add(-1)
				b.Done(ips[k])
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Fatalf("%d Takes went over the limit of %d", over.Load(), limit)
	}
	if n, a := b.Total(), b.addresses(); n != 0 || a != 0 {
		t.Fatalf("after every Done: total %d, %d addresses kept", n, a)
	}
}

// Claim refuses at the address's share first and at the total across
// addresses, and a refusal leaves nothing claimed.
func TestSlotsClaimBounds(t *testing.T) {
	var s Slots
	for _, tc := range []struct {
		ip   string
		want Refusal
	}{
		{"a", Granted}, {"a", Granted}, {"a", ClientFull}, // a holds its 2
		{"b", Granted}, {"c", AllFull}, {"a", AllFull}, // the total of 3 is held
	} {
		if got := s.Claim(tc.ip, 2, 3); got != tc.want {
			t.Fatalf("Claim(%s) = %v, want %v (total %d)", tc.ip, got, tc.want, s.Total())
		}
	}
	if s.Total() != 3 {
		t.Fatalf("total %d after refusals, want the 3 granted", s.Total())
	}
	s.Done("b")
	if got := s.Claim("c", 2, 3); got != Granted {
		t.Fatalf("after b's Done: Claim(c) = %v, want Granted", got)
	}
	for _, ip := range []string{"a", "a", "c"} {
		s.Done(ip)
	}
	if s.Total() != 0 || s.addresses() != 0 {
		t.Fatalf("after every Done: total %d, %d addresses", s.Total(), s.addresses())
	}
}

// Concurrent Claims never pass the total, with no lock between the two
// counters.
func TestSlotsClaimTotalConcurrent(t *testing.T) {
	const total, workers, rounds = 3, 8, 2000
	var s Slots
	var held, over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := string(rune('a' + w))
			for range rounds {
				if s.Claim(ip, 2, total) != Granted {
					continue
				}
				if held.Add(1) > total {
					over.Add(1)
				}
				held.Add(-1)
				s.Done(ip)
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 || s.Total() != 0 || s.addresses() != 0 {
		t.Fatalf("%d claims over the total; left total %d, %d addresses", over.Load(), s.Total(), s.addresses())
	}
}
