package kvevents

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// counter is a Handler that only counts what it is given.
type counter struct {
	batches, events atomic.Int64
	last            atomic.Int64
	gaps            atomic.Int64
}

func (c *counter) Begin(bool) {}
func (c *counter) Apply(seq int64, b Batch) {
	c.batches.Add(1)
	c.events.Add(int64(len(b.Events)))
	c.last.Store(seq)
}
func (c *counter) Gap(int64, int64) { c.gaps.Add(1) }

// benchBatch is an engine step's worth of events: eight stored chains of
// two 16-token blocks and eight removals.
func benchBatch(i int) Batch {
	var b Batch
	for k := range 8 {
		h := uint64(i*16 + k)
		b.Events = append(b.Events, Event{Kind: KindStored, Hashes: []uint64{h, h + 1}, TokenIDs: make([]int, 32), BlockSize: 16, Medium: "GPU"})
		b.Events = append(b.Events, Event{Kind: KindRemoved, Hashes: []uint64{h + 7}, Medium: "GPU"})
	}
	return b
}

// BenchmarkSubscriberDecode measures events per second through the whole
// subscriber: a Publisher on loopback, the Subscriber's sockets, framing
// and msgpack decoding, into a counting Handler. The publisher stays at
// most 512 batches ahead so no high-water mark drops a batch.
func BenchmarkSubscriberDecode(b *testing.B) {
	p, err := NewPublisher(Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BufferSteps: 1024, HWM: 1 << 16, Topic: "kv"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c := &counter{}
	c.last.Store(-1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Subscriber{Endpoint: p.Endpoint(), ReplayEndpoint: p.ReplayEndpoint(), Topic: "kv", Timeout: 5 * time.Second}.Run(ctx, c)
	}()
	defer func() { cancel(); <-done }()
	// Wait for the subscription: publish until a batch arrives.
	for i := 0; c.batches.Load() == 0; i++ {
		if i > 500 {
			b.Fatal("no batch reached the subscriber in 5 s")
		}
		if _, err := p.Publish(benchBatch(0)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	batches := make([]Batch, 64)
	for i := range batches {
		batches[i] = benchBatch(i)
	}
	startEvents := c.events.Load()
	b.ResetTimer()
	start := time.Now()
	var last int64
	for i := 0; i < b.N; i++ {
		if last, err = p.Publish(batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
		for last-c.last.Load() > 512 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.last.Load() < last {
		if time.Now().After(deadline) {
			b.Fatalf("subscriber stopped at %d of %d", c.last.Load(), last)
		}
		time.Sleep(50 * time.Microsecond)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(c.events.Load()-startEvents)/el.Seconds(), "events/s")
	b.ReportMetric(float64(c.gaps.Load()), "gaps")
}
