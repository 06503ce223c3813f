package kvevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"go.uber.org/goleak"
)

type recorder struct {
	mu     sync.Mutex
	begun  []bool
	seqs   []int64
	gaps   [][2]int64
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 64)} }

func (r *recorder) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}
func (r *recorder) Begin(c bool) { r.mu.Lock(); r.begun = append(r.begun, c); r.mu.Unlock(); r.poke() }
func (r *recorder) Apply(seq int64, _ Batch) {
	r.mu.Lock()
	r.seqs = append(r.seqs, seq)
	r.mu.Unlock()
	r.poke()
}
func (r *recorder) Gap(a, b int64) {
	r.mu.Lock()
	r.gaps = append(r.gaps, [2]int64{a, b})
	r.mu.Unlock()
	r.poke()
}

// waitFor polls cond for up to 5 s.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.notify:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("timed out waiting for %s: begun %v seqs %v gaps %v", what, r.begun, r.seqs, r.gaps)
		}
	}
}

func startPub(t *testing.T, steps int) *Publisher {
	t.Helper()
	p, err := NewPublisher(Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BufferSteps: steps, Topic: "kv"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func publishN(t *testing.T, p *Publisher, n int) {
	t.Helper()
	for i := range n {
		if _, err := p.Publish(Batch{TS: float64(i), Events: []Event{{Kind: KindRemoved, Hashes: []uint64{uint64(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func run(t *testing.T, p *Publisher, topic string) *recorder {
	t.Helper()
	r := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Subscriber{Endpoint: p.Endpoint(), ReplayEndpoint: p.ReplayEndpoint(), Topic: topic, Timeout: 2 * time.Second}.Run(ctx, r)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("subscriber did not stop")
		}
	})
	return r
}

func seqRange(a, b int64) string {
	var s []int64
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return fmt.Sprint(s)
}

func TestSubscriberReplaysHistoryThenFollows(t *testing.T) {
	p := startPub(t, 100)
	publishN(t, p, 3)
	r := run(t, p, "kv")
	r.waitFor(t, "replayed history", func() bool { return len(r.seqs) == 3 })
	// Live batches can race the subscription: keep publishing until one
	// arrives live, then the stream must be contiguous from 0.
	publishUntilLive(t, p, r, 3)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.begun) != 1 || !r.begun[0] {
		t.Errorf("Begin = %v, want [true]", r.begun)
	}
	if got, want := fmt.Sprint(r.seqs), seqRange(0, int64(len(r.seqs))); got != want || len(r.gaps) != 0 {
		t.Errorf("seqs %s gaps %v, want %s and no gaps", got, r.gaps, want)
	}
}

func TestSubscriberReportsLostHistory(t *testing.T) {
	p := startPub(t, 2)
	publishN(t, p, 5) // 0..2 fall out of the two-batch buffer
	r := run(t, p, "")
	r.waitFor(t, "replay", func() bool { return len(r.seqs) == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if fmt.Sprint(r.begun) != "[false]" || fmt.Sprint(r.seqs) != "[3 4]" {
		t.Errorf("begun %v seqs %v, want [false] [3 4]", r.begun, r.seqs)
	}
}

func TestSubscriberIgnoresOtherTopics(t *testing.T) {
	p := startPub(t, 10)
	r := run(t, p, "other")
	r.waitFor(t, "begin", func() bool { return len(r.begun) == 1 })
	// A subscriber of the publisher's topic, connected after r, is the
	// evidence r had its chance: zmq4's PUB writer hands each batch to
	// every connection whose subscription matches before it takes the
	// next, so once kv has applied the last batch live, each batch was
	// offered to r as well.
	kv := run(t, p, "kv")
	kv.waitFor(t, "kv begin", func() bool { return len(kv.begun) == 1 })
	publishUntilLive(t, p, kv, 0)
	publishN(t, p, 2)
	p.mu.Lock()
	last := p.next - 1
	p.mu.Unlock()
	kv.waitFor(t, "the kv subscriber has the last batch", func() bool { return len(kv.seqs) > 0 && kv.seqs[len(kv.seqs)-1] == last })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seqs) != 0 {
		t.Errorf("a subscriber of topic other got %v", r.seqs)
	}
}

func TestTCPAddr(t *testing.T) {
	for in, want := range map[string]string{"tcp://*:5557": ":5557", "tcp://127.0.0.1:0": "127.0.0.1:0"} {
		if got, err := TCPAddr(in); err != nil || got != want {
			t.Errorf("TCPAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ipc:///tmp/x", "tcp://nohost"} {
		if _, err := TCPAddr(in); err == nil {
			t.Errorf("TCPAddr(%q) accepted", in)
		}
	}
}

// lose publishes a batch that no subscriber receives but the replay
// buffer keeps: what a PUB socket's high-water-mark drop looks like.
func lose(t *testing.T, p *Publisher) { keepOnly(t, p, Batch{Events: []Event{{Kind: KindCleared}}}) }

func keepOnly(t *testing.T, p *Publisher, b Batch) {
	t.Helper()
	payload, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepLocked(stored{p.next, payload})
	p.next++
}

func TestSubscriberFillsALiveGapFromTheReplay(t *testing.T) {
	p := startPub(t, 100)
	r := run(t, p, "kv")
	r.waitFor(t, "begin", func() bool { return len(r.begun) == 1 })
	publishUntilLive(t, p, r, 0)
	lose(t, p)
	publishN(t, p, 1)
	p.mu.Lock()
	last := p.next - 1
	p.mu.Unlock()
	r.waitFor(t, "the batch after the lost one", func() bool { return len(r.seqs) > 0 && r.seqs[len(r.seqs)-1] == last })
	r.mu.Lock()
	defer r.mu.Unlock()
	if got, want := fmt.Sprint(r.seqs), seqRange(0, last+1); got != want || len(r.gaps) != 0 {
		t.Errorf("seqs %s gaps %v, want %s with the dropped batch replayed and no gap", got, r.gaps, want)
	}
}

func TestSubscriberReportsAGapTheReplayCannotFill(t *testing.T) {
	p := startPub(t, 1) // the buffer keeps only the newest batch
	r := run(t, p, "kv")
	r.waitFor(t, "begin", func() bool { return len(r.begun) == 1 })
	publishUntilLive(t, p, r, 0)
	p.mu.Lock()
	from := p.next // every batch so far is delivered before the loss
	p.mu.Unlock()
	r.waitFor(t, "every live batch", func() bool { return len(r.seqs) > 0 && r.seqs[len(r.seqs)-1] == from-1 })
	lose(t, p)
	lose(t, p)
	publishN(t, p, 1)
	// (a batch that raced the subscription may have been lost too: only the gap after from counts)
	r.waitFor(t, "the gap and the batch after it", func() bool {
		return len(r.gaps) > 0 && r.gaps[len(r.gaps)-1][0] == from && r.seqs[len(r.seqs)-1] >= from+2
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gaps[len(r.gaps)-1] != [2]int64{from, from + 2} || r.seqs[len(r.seqs)-1] != from+2 {
		t.Errorf("gaps %v seqs %v: want batches %d..%d lost and %d applied", r.gaps, r.seqs, from, from+1, from+2)
	}
}

// publishUntilLive publishes one batch at a time until r has applied more
// than have: the first live batches can race the subscription.
func publishUntilLive(t *testing.T, p *Publisher, r *recorder, have int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		publishN(t, p, 1)
		r.mu.Lock()
		n := len(r.seqs)
		r.mu.Unlock()
		if n > have {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.waitFor(t, "a live batch", func() bool { return len(r.seqs) > have })
}

// A peer that accepts the connection and never answers (a frozen engine
// process) fails the subscription within its timeout, leaving nothing
// running: closing the socket ends the handshake zmq4 is blocked in.
func TestSubscriberGivesUpOnASilentPeer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c // read nothing, write nothing
		}
	}()
	defer func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	}()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Subscriber{Endpoint: "tcp://" + ln.Addr().String(), Timeout: 200 * time.Millisecond}.Run(context.Background(), newRecorder())
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no ZMTP handshake within 200ms") {
			t.Errorf("Run = %v, want the handshake timeout", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("Run took %v against a 200 ms timeout", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still blocked 5 s after a 200 ms handshake timeout")
	}
}

// The publisher going away ends Run with an error, so the caller marks
// residency unknown and resubscribes.
func TestSubscriberReturnsWhenThePublisherCloses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction(ParkedPubWriter))
	p, err := NewPublisher(Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", Topic: "kv"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	done := make(chan error, 1)
	go func() {
		done <- Subscriber{Endpoint: p.Endpoint(), ReplayEndpoint: p.ReplayEndpoint(), Topic: "kv", Timeout: 2 * time.Second}.Run(context.Background(), r)
	}()
	r.waitFor(t, "begin", func() bool { return len(r.begun) == 1 })
	p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after the publisher closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after the publisher closed")
	}
}

// Cancelling the context ends Run promptly, also while it waits for a
// replay's answer, and leaves nothing running.
func TestSubscriberStopsOnCancelDuringAReplay(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction(ParkedPubWriter))
	// A ROUTER that never answers: the subscription's first replay waits.
	ctx, cancel := context.WithCancel(context.Background())
	router := zmq4.NewRouter(ctx, zmq4.WithLogger(quiet))
	defer router.Close()
	if err := router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(Config{Endpoint: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := newRecorder()
	done := make(chan error, 1)
	go func() {
		done <- Subscriber{Endpoint: p.Endpoint(), ReplayEndpoint: "tcp://" + router.Addr().String(), Timeout: time.Minute}.Run(ctx, r)
	}()
	if _, err := router.Recv(); err != nil { // the replay request has arrived
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Run took %v to stop after cancel", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after cancel, in a replay with a one-minute timeout")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.begun) != 0 {
		t.Errorf("Begin called with %v before the replay answered", r.begun)
	}
}
