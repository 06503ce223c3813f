package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Handler receives a subscription's batches in sequence order.
type Handler interface {
	// Begin follows the replay at subscription: complete means the
	// handler is about to see every batch since sequence 0 (the replay
	// started there, or the engine had published nothing yet).
	Begin(complete bool)
	// Apply is the batch after the previous one (or the first one).
	Apply(seq int64, b Batch)
	// Gap says batches [from, to) were published but are lost: not
	// received and no longer in the publisher's replay buffer.
	Gap(from, to int64)
}

// Subscriber is a zmq4 SUB socket on vLLM's event endpoint plus a DEALER
// on its replay endpoint, filling sequence gaps from the replay buffer.
type Subscriber struct {
	Endpoint, ReplayEndpoint, Topic string
	Timeout                         time.Duration // dial, handshake and each replayed message; default 5 s
}

type live struct {
	seq int64
	b   Batch
	err error
}

// liveBuffer bounds the batches read off the SUB socket and not yet
// applied (a replay in progress holds them back); past it the socket's
// TCP window fills and the engine's PUB drops at its high-water mark,
// which the next sequence number shows as a gap.
const liveBuffer = 1024

// Run subscribes and feeds h until ctx ends or a socket fails (the
// returned error says which; the caller resubscribes).
func (s Subscriber) Run(ctx context.Context, h Handler) error {
	to := s.Timeout
	if to <= 0 {
		to = handshakeTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := zmq4.NewSub(ctx, socketOptions(to)...)
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, s.Topic); err != nil {
		return fmt.Errorf("kvevents: subscribe to topic %q: %w", s.Topic, err)
	}
	if err := dial(ctx, sub, s.Endpoint, to); err != nil {
		return err
	}
	var rep *replayer
	if s.ReplayEndpoint != "" {
		d := zmq4.NewDealer(ctx, socketOptions(to)...)
		defer d.Close()
		if err := dial(ctx, d, s.ReplayEndpoint, to); err != nil {
			return err
		}
		rep = newReplayer(ctx, d, to)
	}
	msgs := make(chan live, liveBuffer)
	go readLive(ctx, sub, []byte(s.Topic), msgs)
	next, err := s.begin(rep, h)
	if err != nil {
		return err
	}
	for m := range msgs {
		if m.err != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("kvevents: %s: %w", s.Endpoint, m.err))
		}
		if next, err = s.deliver(rep, h, next, m); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// readLive decodes (topic, seq, payload) messages until the socket fails
// or ctx ends; other messages are skipped.
func readLive(ctx context.Context, sub zmq4.Socket, topic []byte, out chan<- live) {
	defer close(out)
	for {
		msg, err := sub.Recv()
		var m live
		switch {
		case err != nil:
			m.err = err
		case len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 || !bytes.HasPrefix(msg.Frames[0], topic):
			continue // not an event message
		default:
			m.seq = int64(binary.BigEndian.Uint64(msg.Frames[1]))
			if m.b, err = DecodeBatch(msg.Frames[2]); err != nil {
				m.err = fmt.Errorf("batch %d: %w", m.seq, err)
			}
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
		if m.err != nil {
			return
		}
	}
}

// begin replays from 0 and reports whether history is complete; it
// returns the next sequence expected.
func (s Subscriber) begin(rep *replayer, h Handler) (int64, error) {
	if rep == nil {
		h.Begin(false)
		return -1, nil // first live batch sets the sequence
	}
	next, begun := int64(0), false
	err := rep.replay(0, func(seq int64, b Batch) {
		if !begun {
			begun = true
			h.Begin(seq == 0)
			next = seq
		}
		next = applyOne(h, next, seq, b)
	})
	if err != nil {
		return 0, err
	}
	if !begun {
		h.Begin(true) // nothing published yet
	}
	return next, nil
}

// applyOne applies a replayed batch at or after next, returning the new
// next: older batches were already applied, newer ones follow a gap.
func applyOne(h Handler, next, seq int64, b Batch) int64 {
	if seq < next {
		return next
	}
	if seq > next {
		h.Gap(next, seq)
	}
	h.Apply(seq, b)
	return seq + 1
}

// deliver applies one live batch, first filling any gap from the replay.
func (s Subscriber) deliver(rep *replayer, h Handler, next int64, m live) (int64, error) {
	switch {
	case next < 0:
		h.Apply(m.seq, m.b)
		return m.seq + 1, nil
	case m.seq < next:
		return next, nil // already seen in a replay
	case m.seq > next && rep != nil:
		err := rep.replay(next, func(seq int64, b Batch) { next = applyOne(h, next, seq, b) })
		if err != nil {
			return next, err
		}
		if m.seq < next {
			return next, nil // the replay reached past it
		}
	}
	return applyOne(h, next, m.seq, m.b), nil
}
