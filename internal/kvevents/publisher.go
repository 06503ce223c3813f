package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// Config is vLLM's --kv-events-config for the zmq publisher.
type Config struct {
	Enable         bool   `json:"enable_kv_cache_events"`
	Publisher      string `json:"publisher"`       // "zmq" (or "null")
	Endpoint       string `json:"endpoint"`        // PUB: tcp://*:5557
	ReplayEndpoint string `json:"replay_endpoint"` // ROUTER: tcp://*:5558; "" no replay
	BufferSteps    int    `json:"buffer_steps"`    // batches kept for replay (10000)
	HWM            int    `json:"hwm"`             // messages queued per subscriber before drops (100000)
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

// TCPAddr turns a ZeroMQ tcp endpoint into a Go address ("*" is every
// interface). Only tcp:// is supported: ipc:// needs a Unix-socket
// transport this package does not implement.
func TCPAddr(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("kvevents: endpoint %q is not tcp://host:port (only the tcp transport is implemented)", endpoint)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("kvevents: endpoint %q: %w", endpoint, err)
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}

// endSeq is the replay's end marker: -1 as 8 big-endian bytes.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const handshakeTimeout = 5 * time.Second

type stored struct {
	seq     int64
	payload []byte
}

type pubPeer struct {
	z      *zconn
	out    chan [][]byte
	mu     sync.Mutex // guards topics
	topics [][]byte
}

func (s *pubPeer) wants(topic []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		if bytes.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

// Publisher is vLLM's ZmqEventPublisher: a PUB socket sending
// (topic, seq, payload) and a ROUTER socket answering replay requests
// from its buffer of recent batches.
type Publisher struct {
	cfg   Config
	topic []byte

	mu    sync.Mutex // guards next, buf, head, peers, conns
	next  int64
	buf   []stored // ring of the last BufferSteps batches; oldest at head once full
	head  int
	peers map[*pubPeer]struct{}
	conns map[net.Conn]struct{}

	pubLn, replayLn net.Listener
	wg              sync.WaitGroup
	closeOnce       sync.Once
}

// NewPublisher binds the PUB and replay sockets.
func NewPublisher(cfg Config) (*Publisher, error) {
	cfg.Defaults()
	addr, err := TCPAddr(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, topic: []byte(cfg.Topic), peers: map[*pubPeer]struct{}{}, conns: map[net.Conn]struct{}{}}
	if p.pubLn, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("kvevents: bind %s: %w (choose another endpoint port)", cfg.Endpoint, err)
	}
	if cfg.ReplayEndpoint != "" {
		raddr, err := TCPAddr(cfg.ReplayEndpoint)
		if err == nil {
			p.replayLn, err = net.Listen("tcp", raddr)
		}
		if err != nil {
			p.pubLn.Close()
			return nil, fmt.Errorf("kvevents: bind replay %s: %w (choose another replay_endpoint port)", cfg.ReplayEndpoint, err)
		}
		p.accept(p.replayLn, p.serveReplay)
	}
	p.accept(p.pubLn, p.servePub)
	return p, nil
}

// Endpoint and ReplayEndpoint are the bound tcp:// addresses.
func (p *Publisher) Endpoint() string { return "tcp://" + p.pubLn.Addr().String() }

func (p *Publisher) ReplayEndpoint() string {
	if p.replayLn == nil {
		return ""
	}
	return "tcp://" + p.replayLn.Addr().String()
}

func (p *Publisher) accept(ln net.Listener, serve func(net.Conn)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				serve(c)
				c.Close()
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
			}()
		}
	}()
}

// Publish sends one batch to every subscriber of the topic and keeps it
// for replay; it returns the batch's sequence number. It never blocks on
// a slow subscriber.
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
	msg := [][]byte{p.topic, binary.BigEndian.AppendUint64(nil, uint64(seq)), payload}
	for s := range p.peers {
		if !s.wants(p.topic) {
			continue
		}
		select {
		case s.out <- msg:
		default: // over the high-water mark: dropped, as ZeroMQ PUB does
		}
	}
	return seq, nil
}

func (p *Publisher) servePub(c net.Conn) {
	z, err := handshake(c, "PUB", true, handshakeTimeout)
	if err != nil {
		return
	}
	s := &pubPeer{z: z, out: make(chan [][]byte, min(p.cfg.HWM, 1<<16))}
	p.mu.Lock()
	p.peers[s] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.peers, s)
		p.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range s.out {
			if z.writeMsg(msg...) != nil {
				c.Close()
				return
			}
		}
	}()
	p.readSubscriptions(s)
	close(s.out)
	<-done
}

// readSubscriptions applies (un)subscribe messages and commands until the
// subscriber goes away.
func (p *Publisher) readSubscriptions(s *pubPeer) {
	sub := func(on bool, topic []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if on {
			s.topics = append(s.topics, append([]byte(nil), topic...))
			return
		}
		for i, t := range s.topics {
			if bytes.Equal(t, topic) {
				s.topics = append(s.topics[:i], s.topics[i+1:]...)
				return
			}
		}
	}
	onCommand := func(name string, data []byte) {
		switch name {
		case "SUBSCRIBE":
			sub(true, data)
		case "CANCEL":
			sub(false, data)
		}
	}
	for {
		msg, err := s.z.readMsg(onCommand)
		if err != nil {
			return
		}
		if len(msg) == 1 && len(msg[0]) >= 1 && msg[0][0] <= 1 {
			sub(msg[0][0] == 1, msg[0][1:])
		}
	}
}

// serveReplay answers [empty, start_seq] requests with every buffered
// batch from start_seq on, as [empty, seq, payload], then [empty, -1, ""].
func (p *Publisher) serveReplay(c net.Conn) {
	z, err := handshake(c, "ROUTER", true, handshakeTimeout)
	if err != nil {
		return
	}
	for {
		msg, err := z.readMsg(nil)
		if err != nil {
			return
		}
		start, ok := replayStart(msg)
		if !ok {
			continue // vLLM logs and ignores a malformed request
		}
		out := p.buffered(start)
		var werr error
		for _, s := range out {
			werr = errors.Join(werr, z.writeMsg(nil, binary.BigEndian.AppendUint64(nil, uint64(s.seq)), s.payload))
		}
		if errors.Join(werr, z.writeMsg(nil, endSeq, nil)) != nil {
			return
		}
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

func replayStart(msg [][]byte) (int64, bool) {
	if len(msg) == 0 {
		return 0, false
	}
	last := msg[len(msg)-1]
	if len(last) != 8 || (len(msg) == 2 && len(msg[0]) != 0) || len(msg) > 2 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(last)), true
}

// Close stops both sockets and every connection.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.pubLn.Close()
		if p.replayLn != nil {
			p.replayLn.Close()
		}
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
	return nil
}
