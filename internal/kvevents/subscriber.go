package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
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

// Subscriber is a SUB socket on vLLM's event endpoint plus a DEALER on its
// replay endpoint, filling sequence gaps from the replay buffer.
type Subscriber struct {
	Endpoint, ReplayEndpoint, Topic string
	Timeout                         time.Duration // dial, handshake and replay; default 5 s
}

type live struct {
	seq int64
	b   Batch
	err error
}

// Run subscribes and feeds h until ctx ends or a socket fails (the
// returned error says which; the caller resubscribes).
func (s Subscriber) Run(ctx context.Context, h Handler) error {
	to := s.Timeout
	if to <= 0 {
		to = handshakeTimeout
	}
	sub, err := s.dial(ctx, s.Endpoint, "SUB", to)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.writeMsg(append([]byte{1}, s.Topic...)); err != nil {
		return fmt.Errorf("kvevents: subscribe on %s: %w", s.Endpoint, err)
	}
	var rep *zconn
	if s.ReplayEndpoint != "" {
		if rep, err = s.dial(ctx, s.ReplayEndpoint, "DEALER", to); err != nil {
			return err
		}
		defer rep.Close()
	}
	stop := context.AfterFunc(ctx, func() { sub.Close(); closeConn(rep) })
	defer stop()
	msgs := make(chan live, 1024)
	go readLive(sub, msgs)
	next, err := s.begin(rep, h, to)
	if err != nil {
		return err
	}
	for m := range msgs {
		if m.err != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("kvevents: %s: %w", s.Endpoint, m.err))
		}
		if next, err = s.deliver(rep, h, next, m, to); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func closeConn(z *zconn) {
	if z != nil {
		z.Close()
	}
}

func (s Subscriber) dial(ctx context.Context, endpoint, socketType string, to time.Duration) (*zconn, error) {
	addr, err := TCPAddr(endpoint)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: to}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kvevents: connect %s: %w (is the engine publishing KV events there?)", endpoint, err)
	}
	z, err := handshake(c, socketType, false, to)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("kvevents: %s: %w", endpoint, err)
	}
	return z, nil
}

func readLive(z *zconn, out chan<- live) {
	defer close(out)
	for {
		msg, err := z.readMsg(nil)
		if err != nil {
			out <- live{err: err}
			return
		}
		if len(msg) != 3 || len(msg[1]) != 8 {
			continue // not an event message
		}
		b, err := DecodeBatch(msg[2])
		if err != nil {
			out <- live{err: err}
			return
		}
		out <- live{seq: int64(binary.BigEndian.Uint64(msg[1])), b: b}
	}
}

// begin replays from 0 and reports whether history is complete; it
// returns the next sequence expected.
func (s Subscriber) begin(rep *zconn, h Handler, to time.Duration) (int64, error) {
	if rep == nil {
		h.Begin(false)
		return -1, nil // first live batch sets the sequence
	}
	got, err := replay(rep, 0, to)
	if err != nil {
		return 0, err
	}
	complete := len(got) == 0 || got[0].seq == 0
	h.Begin(complete)
	next := int64(0)
	if !complete {
		next = got[0].seq
	}
	return s.applyRun(h, next, got), nil
}

// applyRun applies a replayed run from next on, returning the new next.
func (s Subscriber) applyRun(h Handler, next int64, run []live) int64 {
	for _, m := range run {
		if m.seq < next {
			continue
		}
		if m.seq > next {
			h.Gap(next, m.seq)
		}
		h.Apply(m.seq, m.b)
		next = m.seq + 1
	}
	return next
}

// deliver applies one live batch, first filling any gap from the replay.
func (s Subscriber) deliver(rep *zconn, h Handler, next int64, m live, to time.Duration) (int64, error) {
	switch {
	case next < 0:
		h.Apply(m.seq, m.b)
		return m.seq + 1, nil
	case m.seq < next:
		return next, nil // already seen in a replay
	case m.seq > next && rep != nil:
		got, err := replay(rep, next, to)
		if err != nil {
			return next, err
		}
		next = s.applyRun(h, next, got)
		if m.seq < next {
			return next, nil
		}
	}
	if m.seq > next {
		h.Gap(next, m.seq)
	}
	h.Apply(m.seq, m.b)
	return m.seq + 1, nil
}

// replay asks for every buffered batch from start and reads to the end
// marker.
func replay(z *zconn, start int64, to time.Duration) ([]live, error) {
	_ = z.c.SetDeadline(time.Now().Add(to))
	defer z.c.SetDeadline(time.Time{})
	if err := z.writeMsg(nil, binary.BigEndian.AppendUint64(nil, uint64(start))); err != nil {
		return nil, fmt.Errorf("kvevents: replay request: %w", err)
	}
	var out []live
	for {
		msg, err := z.readMsg(nil)
		if err != nil {
			return nil, fmt.Errorf("kvevents: replay: %w", err)
		}
		if len(msg) > 0 && len(msg[0]) == 0 {
			msg = msg[1:] // the delimiter a ROUTER puts before a DEALER's reply
		}
		if len(msg) != 2 || len(msg[0]) != 8 {
			return nil, errors.New("kvevents: replay: reply is not (seq, payload)")
		}
		seq := int64(binary.BigEndian.Uint64(msg[0]))
		if seq == -1 {
			return out, nil
		}
		b, err := DecodeBatch(msg[1])
		if err != nil {
			return nil, err
		}
		out = append(out, live{seq: seq, b: b})
	}
}
