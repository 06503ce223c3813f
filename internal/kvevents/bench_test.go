package kvevents

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
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

// publishPayload is Publish for a payload already encoded.
func (p *Publisher) publishPayload(payload []byte) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.next
	p.next++
	p.keepLocked(stored{seq, payload})
	return seq, p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, uint64(seq)), payload))
}

// BenchmarkSubscriberDecode measures events per second through the whole
// subscriber: a Publisher on loopback, the Subscriber's sockets, framing
// and msgpack decoding, into a counting Handler. The publisher stays at
// most 512 batches ahead so no high-water mark drops a batch. map is
// vLLM's current wire form; array its form before vllm-project/vllm#42892
// (what the hand-written ZMTP's benchmark, commit f46d0ba, sent).
func BenchmarkSubscriberDecode(b *testing.B) {
	mapForm := make([][]byte, 64)
	arrays := make([][]byte, 64)
	for i := range mapForm {
		var err error
		if mapForm[i], err = benchBatch(i).Encode(); err != nil {
			b.Fatal(err)
		}
		arrays[i] = arrayForm(benchBatch(i))
	}
	for _, form := range []struct {
		name     string
		payloads [][]byte
	}{{"map", mapForm}, {"array", arrays}} {
		b.Run(form.name, func(b *testing.B) { benchSubscriber(b, form.payloads) })
	}
}

func benchSubscriber(b *testing.B, payloads [][]byte) {
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
		if _, err := p.publishPayload(payloads[0]); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	startEvents := c.events.Load()
	b.ResetTimer()
	start := time.Now()
	var last int64
	for i := 0; i < b.N; i++ {
		if last, err = p.publishPayload(payloads[i%len(payloads)]); err != nil {
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

// arrayForm is b as vLLM wrote it before vllm-project/vllm#42892:
// positional events.
func arrayForm(b Batch) []byte {
	evs := make([]any, 0, len(b.Events))
	for _, e := range b.Events {
		switch e.Kind {
		case KindStored:
			evs = append(evs, []any{e.Kind, e.Hashes, nil, e.TokenIDs, e.BlockSize, nil, e.Medium, nil})
		case KindRemoved:
			evs = append(evs, []any{e.Kind, e.Hashes, e.Medium})
		default:
			evs = append(evs, []any{e.Kind})
		}
	}
	p, err := msgpack.Marshal([]any{b.TS, evs, 0})
	if err != nil {
		panic(err)
	}
	return p
}

// BenchmarkDecodeBatch separates the decoder's share from the sockets':
// one engine step's batch in vLLM's current map form and in its earlier
// positional form.
func BenchmarkDecodeBatch(b *testing.B) {
	mapForm, err := benchBatch(1).Encode()
	if err != nil {
		b.Fatal(err)
	}
	for name, p := range map[string][]byte{"map": mapForm, "array": arrayForm(benchBatch(1))} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := DecodeBatch(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(benchBatch(1).Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
