package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// The replay exchange, as vLLM's ZmqEventPublisher serves it on its
// ROUTER socket (vllm/distributed/kv_events.py, _service_replay):
//
//   - the request is [b"", start_seq] (8 bytes big-endian): the ROUTER
//     refuses anything that does not arrive as [identity, b"", start_seq];
//   - each buffered batch from start_seq on comes back as
//     [b"", topic, seq, payload] since vllm-project/vllm#45177 (merged
//     June 2026), [b"", seq, payload] before it;
//   - the end marker is [b"", b"", END_SEQ, b""] (resp. [b"", END_SEQ,
//     b""]) where END_SEQ is -1 as 8 signed big-endian bytes.
//
// Read at https://github.com/vllm-project/vllm/blob/b4e69e0af33f4698e157a262cc787fe61983cd3d/vllm/distributed/kv_events.py
// (two-frame replies) and, for the topic frame, vLLM's own subscriber at
// https://github.com/vllm-project/vllm/blob/1bd773f6a52899e189c8237e55473cda0074f2fb/examples/features/kv_events/kv_events_subscriber.py
// ("_, seq_bytes, replay_payload = replay.recv_multipart()") and test at
// https://github.com/vllm-project/vllm/blob/05d3142f485910eab6c3421d8dcf37be44d5eaca/tests/distributed/test_events.py
// (test_replay_includes_topic).

// endSeq is the replay's end marker: -1 as 8 big-endian bytes.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// maxReplay bounds one replay's batches: vLLM keeps buffer_steps (10,000
// by default) batches, so a longer answer is not a replay.
const maxReplay = 1 << 20

type reply struct {
	frames [][]byte
	err    error
}

// replayer owns the DEALER socket: one goroutine reads it into in, so a
// replay can give up after its timeout.
type replayer struct {
	ctx context.Context // the subscription's: a replay ends with it
	d   zmq4.Socket
	in  chan reply
	to  time.Duration
}

func newReplayer(ctx context.Context, d zmq4.Socket, to time.Duration) *replayer {
	r := &replayer{ctx: ctx, d: d, in: make(chan reply, 64), to: to}
	go func() {
		for {
			m, err := d.Recv()
			select {
			case r.in <- reply{m.Frames, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// replay asks for every buffered batch from start and hands each to fn
// in order, up to the end marker. A message not arriving within the
// timeout fails it: the caller resubscribes.
func (r *replayer) replay(start int64, fn func(int64, Batch)) error {
	req := zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, uint64(start)))
	if err := r.d.SendMulti(req); err != nil {
		return fmt.Errorf("kvevents: replay request from %d: %w", start, err)
	}
	t := time.NewTimer(r.to)
	defer t.Stop()
	for n := 0; n <= maxReplay; n++ {
		var m reply
		select {
		case m = <-r.in:
		case <-t.C:
			return fmt.Errorf("kvevents: replay from %d: no answer within %v (is replay_endpoint the engine's?)", start, r.to)
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		if m.err != nil {
			return fmt.Errorf("kvevents: replay from %d: %w", start, m.err)
		}
		seq, payload, err := replayFrames(m.frames)
		if err != nil || seq == -1 {
			return err
		}
		b, err := DecodeBatch(payload)
		if err != nil {
			return fmt.Errorf("kvevents: replayed batch %d: %w", seq, err)
		}
		fn(seq, b)
		t.Reset(r.to)
	}
	return fmt.Errorf("kvevents: replay from %d: more than %d batches", start, maxReplay)
}

// replayFrames reads one answer in either of vLLM's shapes; seq is -1
// for the end marker.
func replayFrames(f [][]byte) (int64, []byte, error) {
	if len(f) > 0 && len(f[0]) == 0 {
		f = f[1:] // the delimiter the ROUTER puts before a DEALER's reply
	}
	if len(f) == 3 {
		f = f[1:] // the topic
	}
	if len(f) != 2 || len(f[0]) != 8 {
		return 0, nil, errors.New("kvevents: replay: answer is neither (topic, seq, payload) nor (seq, payload); is replay_endpoint the engine's?")
	}
	return int64(binary.BigEndian.Uint64(f[0])), f[1], nil
}
