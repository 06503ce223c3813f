package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Config is vLLM's --kv-events-config for the zmq publisher; the defaults
// are ZmqEventPublisher.__init__'s in
// https://github.com/vllm-project/vllm/blob/0181ea3173e53eea8cf04a86891488e3dc89bb34/vllm/distributed/kv_events.py
// (endpoint tcp://*:5557, buffer_steps 10_000, hwm 100_000, topic "").
type Config struct {
	Enable         bool   `json:"enable_kv_cache_events"`
	Publisher      string `json:"publisher"`       // "zmq" (or "null")
	Endpoint       string `json:"endpoint"`        // PUB: tcp://*:5557
	ReplayEndpoint string `json:"replay_endpoint"` // ROUTER: tcp://*:5558; "" no replay
	BufferSteps    int    `json:"buffer_steps"`    // batches kept for replay (10000)
	HWM            int    `json:"hwm"`             // messages queued before drops (100000)
	Topic          string `json:"topic"`
}

// Defaults fills vLLM's defaults.
func (c *Config) Defaults() {
	if c.Publisher == "" {
		c.Publisher = "zmq"
	}
	if c.Endpoint == "" {
		c.Endpoint = "tcp://*:5557"
	}
	if c.BufferSteps <= 0 {
		c.BufferSteps = 10000
	}
	if c.HWM <= 0 {
		c.HWM = 100000
	}
}

const handshakeTimeout = 5 * time.Second

type stored struct {
	seq     int64
	payload []byte
}

// Publisher is vLLM's ZmqEventPublisher over zmq4: a PUB socket sending
// (topic, seq, payload) and a ROUTER socket answering replay requests
// from its buffer of recent batches, in the shapes replay.go describes
// (the current vLLM's, with the topic frame).
//
// zmq4's PUB queues every message for all subscribers together and drops
// once HWM messages wait; one writer sends to each subscriber in turn, so
// a subscriber that stops reading holds back the others until the queue
// fills (libzmq keeps a queue per subscriber).
type Publisher struct {
	cfg   Config
	topic []byte

	mu   sync.Mutex // guards next, buf, head; held across a send to keep sequence order
	next int64
	buf  []stored // ring of the last BufferSteps batches; oldest at head once full
	head int

	pub, router zmq4.Socket // router is nil without a replay endpoint
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once
}

// NewPublisher binds the PUB and replay sockets.
func NewPublisher(cfg Config) (*Publisher, error) {
	cfg.Defaults()
	addr, err := TCPAddr(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{cfg: cfg, topic: []byte(cfg.Topic), cancel: cancel}
	p.pub = zmq4.NewPub(ctx, socketOptions(handshakeTimeout)...)
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
		p.Close()
		return nil, fmt.Errorf("kvevents: hwm %d: %w", cfg.HWM, err)
	}
	if err := p.pub.Listen("tcp://" + addr); err != nil {
		p.Close()
		return nil, fmt.Errorf("kvevents: bind %s: %w (choose another endpoint port)", cfg.Endpoint, err)
	}
	if cfg.ReplayEndpoint == "" {
		return p, nil
	}
	raddr, err := TCPAddr(cfg.ReplayEndpoint)
	if err == nil {
		p.router = zmq4.NewRouter(ctx, socketOptions(handshakeTimeout)...)
		err = p.router.Listen("tcp://" + raddr)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("kvevents: bind replay %s: %w (choose another replay_endpoint port)", cfg.ReplayEndpoint, err)
	}
	p.wg.Add(1)
	go p.serveReplay()
	return p, nil
}

// Endpoint and ReplayEndpoint are the bound tcp:// addresses.
func (p *Publisher) Endpoint() string { return "tcp://" + p.pub.Addr().String() }

func (p *Publisher) ReplayEndpoint() string {
	if p.router == nil {
		return ""
	}
	return "tcp://" + p.router.Addr().String()
}

// Publish sends one batch to every subscriber of the topic and keeps it
// for replay; it returns the batch's sequence number. It never blocks on
// a slow subscriber: past the high-water mark the batch is dropped for
// the live stream (still replayable), as ZeroMQ's PUB does.
func (p *Publisher) Publish(b Batch) (int64, error) {
	payload, err := b.Encode()
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.next
	p.next++
	p.keepLocked(stored{seq, payload})
	// vLLM sends (topic_bytes, seq.to_bytes(8, "big"), payload), seq
	// counting from 0 (_publisher_thread, same file as Config's defaults).
	msg := zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, uint64(seq)), payload)
	if err := p.pub.SendMulti(msg); err != nil {
		return seq, fmt.Errorf("kvevents: publish batch %d: %w", seq, err)
	}
	return seq, nil
}

// serveReplay answers [identity, "", start_seq] requests until Close;
// vLLM logs and ignores a malformed one.
func (p *Publisher) serveReplay() {
	defer p.wg.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			return
		}
		f := msg.Frames
		if len(f) != 3 || len(f[1]) != 0 || len(f[2]) != 8 {
			continue
		}
		id, start := f[0], int64(binary.BigEndian.Uint64(f[2]))
		for _, s := range p.buffered(start) {
			seq := binary.BigEndian.AppendUint64(nil, uint64(s.seq))
			if p.router.SendMulti(zmq4.NewMsgFrom(id, nil, p.topic, seq, s.payload)) != nil {
				break
			}
		}
		_ = p.router.SendMulti(zmq4.NewMsgFrom(id, nil, nil, endSeq, nil))
	}
}

// keepLocked puts a batch in the replay ring, over the oldest once full.
func (p *Publisher) keepLocked(s stored) {
	if len(p.buf) < p.cfg.BufferSteps {
		p.buf = append(p.buf, s)
		return
	}
	p.buf[p.head] = s
	p.head = (p.head + 1) % len(p.buf)
}

// buffered copies the kept batches from start on, oldest first.
func (p *Publisher) buffered(start int64) []stored {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []stored
	for k := range p.buf {
		if s := p.buf[(p.head+k)%len(p.buf)]; s.seq >= start {
			out = append(out, s)
		}
	}
	return out
}

// Close stops both sockets and every connection.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		p.pub.Close()
		if p.router != nil {
			p.router.Close()
		}
	})
	p.wg.Wait()
	return nil
}

// ParkedPubWriter is the function of the one goroutine each zmq4
// PUB socket leaves behind after Close: zmq4 v0.17.0 starts the socket's
// writer at creation and only a writer Close, which the socket's Close
// never calls, ends it. It holds no connection, only the empty queue.
// Tests that check for leaked goroutines ignore it
// (goleak.IgnoreAnyFunction(kvevents.ParkedPubWriter)).
const ParkedPubWriter = "github.com/go-zeromq/zmq4.(*pubMWriter).run"
