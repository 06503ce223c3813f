package kvevents

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// blockModel publishes random engine steps and keeps the block set a
// consumer must end up with.
type blockModel struct {
	rng    *rand.Rand
	blocks map[uint64]bool
}

func (m *blockModel) step() Batch {
	var b Batch
	hs := []uint64{m.rng.Uint64(), m.rng.Uint64()}
	b.Events = append(b.Events, Event{Kind: KindStored, Hashes: hs, TokenIDs: make([]int, 32), BlockSize: 16, Medium: "GPU"})
	for _, h := range hs {
		m.blocks[h] = true
	}
	if len(m.blocks) > 4 {
		gone := slices.Sorted(maps.Keys(m.blocks))[m.rng.IntN(len(m.blocks))]
		b.Events = append(b.Events, Event{Kind: KindRemoved, Hashes: []uint64{gone}, Medium: "GPU"})
		delete(m.blocks, gone)
	}
	return b
}

func (m *blockModel) want() []uint64 { return slices.Sorted(maps.Keys(m.blocks)) }

type followerReport struct {
	Seq     int64    `json:"seq"`
	Blocks  []uint64 `json:"blocks"`
	Replays int      `json:"replays"`
}

// TestPublisherToLibzmqSubscriber: the simulated engine's publisher
// (zmq4 PUB + ROUTER) feeds a consumer on libzmq built like vLLM's own
// example subscriber (testdata/vllm_subscriber.py): history replayed at
// start, live batches, and a range kept only in the replay buffer, which
// the consumer must fetch over its DEALER.
func TestPublisherToLibzmqSubscriber(t *testing.T) {
	p := startPub(t, 100)
	m := &blockModel{rng: rand.New(rand.NewPCG(1, 2)), blocks: map[uint64]bool{}}
	for range 3 { // history before the consumer connects
		if _, err := p.Publish(m.step()); err != nil {
			t.Fatal(err)
		}
	}
	py := StartPython(t, "testdata/vllm_subscriber.py", "--endpoint", p.Endpoint(), "--replay-endpoint", p.ReplayEndpoint(), "--topic", "kv")
	if l := py.Line(t); l != `{"ready": true}` {
		t.Fatalf("vllm_subscriber.py started with %q", l)
	}
	report := func() followerReport {
		py.Send(t, "report")
		var r followerReport
		if err := json.Unmarshal([]byte(py.Line(t)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// reportAt asks until the consumer has applied seq, for at most 5 s.
	reportAt := func(seq int64) followerReport {
		deadline := time.Now().Add(5 * time.Second)
		r := report()
		for r.Seq < seq && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			r = report()
		}
		return r
	}
	// Publish until the consumer applies one: ZeroMQ drops what a PUB
	// socket sends before the subscription reaches it.
	last, r := int64(-1), followerReport{Seq: -1}
	for i := 0; i == 0 || (i < 100 && r.Seq < last); i++ {
		var err error
		if last, err = p.Publish(m.step()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		r = report()
	}
	r = reportAt(last)
	if r.Seq != last || !slices.Equal(r.Blocks, m.want()) {
		t.Fatalf("consumer at %d with %v, want %d with %v", r.Seq, r.Blocks, last, m.want())
	}
	before := r.Replays
	for range 3 {
		keepOnly(t, p, m.step())
	}
	for range 2 {
		var err error
		if last, err = p.Publish(m.step()); err != nil {
			t.Fatal(err)
		}
	}
	r = reportAt(last)
	if r.Seq != last || !slices.Equal(r.Blocks, m.want()) || r.Replays <= before {
		t.Fatalf("after a dropped range: consumer at %d with %v after %d replays, want %d with %v after more than %d", r.Seq, r.Blocks, r.Replays, last, m.want(), before)
	}
}
