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
