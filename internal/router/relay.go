package router

import (
	"bytes"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// sink receives a decode leg's events: a relay for streaming clients, an
// assembler for the rest.
type sink interface {
	event(ev vllm.Event) error
	finish() error
}

func newSink(c *call, ready func() bool) sink {
	if c.ex.resp != nil {
		return c.ex.resp.sink(c, ready)
	}
	if c.adm.q.Stream {
		return &relay{c: c, ready: ready}
	}
	return newAssembler(c)
}

// errClientGone ends a leg whose client stopped reading.
var errClientGone = &fault.Error{Phase: fault.Decode, Reason: fault.ClientGone, Msg: "client went away"}

// relay streams events to the client. Before the first token the status
// and events are held, so a failure before output still gets a real HTTP
// status; from the first token on, each event is written, and flushed
// unless the engine's next event is already buffered (then it goes out
// with that one's flush: a syscall saved, no token delayed).
type relay struct {
	c       *call
	ready   func() bool // the next engine event is buffered (vllm.Stream.Ready)
	held    [][]byte    // whole frames held before the first token
	heldLen int         // their payload bytes
	frame   []byte      // the frame being built, reused across events
	legFor  int         // the attempt leg was built for
	leg     []byte      // the engine-side id ownID replaces
	rc      *http.ResponseController
	pending int // bytes written since the last flush
}

// maxHeldEvents bounds the events held before the first token.
const maxHeldEvents = 64

// maxUnflushed bounds what coalescing keeps in the writer.
const maxUnflushed = 32 << 10

// frameOverhead is the "data: " and "\n\n" around a payload.
const frameOverhead = len("data: \n\n")

func (s *relay) event(ev vllm.Event) error {
	c := s.c
	s.frame = s.appendFrame(s.frame[:0], ev)
	if !c.ex.committed && ev.Tokens == 0 && !ev.Output {
		s.held = append(s.held, bytes.Clone(s.frame))
		s.heldLen += len(s.frame) - frameOverhead
		if len(s.held) > maxHeldEvents || s.heldLen > c.r.cfg.Serving.MaxResponseBytes {
			return &fault.Error{Phase: fault.Decode, Reason: fault.ResponseLimit, Class: fault.ClassStream,
				Msg: "too much stream metadata before the first token"}
		}
		return nil
	}
	if !c.ex.committed {
		s.commit()
	}
	if e := s.writeNoFlush(s.frame); e != nil {
		return e
	}
	if s.ready != nil && s.ready() && s.pending < maxUnflushed {
		return nil
	}
	return s.flush()
}

// appendFrame builds the client's frame for ev: the router's request id
// in place of the leg id, the router's token ids cut out.
func (s *relay) appendFrame(dst []byte, ev vllm.Event) []byte {
	c := s.c
	dst = append(dst, "data: "...)
	mark := len(dst)
	if s.leg == nil || s.legFor != c.att.n {
		s.leg, s.legFor = []byte(legID(c.rid, c.att.n, fault.Decode)), c.att.n
	}
	dst = appendReplaced(dst, ev.Data, s.leg, c.rid)
	if !ev.NotJSON && !c.adm.q.ClientTokenIDs {
		dst = dst[:mark+len(openai.StripTokenIDsInPlace(dst[mark:]))]
	}
	return append(dst, "\n\n"...)
}

// appendReplaced appends data with every old replaced by new, as
// bytes.ReplaceAll does, without allocating a result of its own.
func appendReplaced(dst, data, old []byte, new string) []byte {
	for {
		i := bytes.Index(data, old)
		if i < 0 {
			return append(dst, data...)
		}
		dst = append(append(dst, data[:i]...), new...)
		data = data[i+len(old):]
	}
}

func (s *relay) commit() {
	c := s.c
	h := c.ex.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.ex.w.WriteHeader(http.StatusOK)
	c.ex.committed = true
	for _, f := range s.held {
		if s.writeNoFlush(f) != nil {
			return
		}
	}
	s.held = nil
}

func (s *relay) writeNoFlush(frame []byte) error {
	if _, err := s.c.ex.w.Write(frame); err != nil {
		s.c.ex.clientGone = true
		return errClientGone
	}
	s.pending += len(frame)
	return nil
}

func (s *relay) flush() error {
	if s.rc == nil {
		s.rc = http.NewResponseController(s.c.ex.w)
	}
	s.pending = 0
	if err := s.rc.Flush(); err != nil {
		s.c.ex.clientGone = true
		return errClientGone
	}
	return nil
}

func (s *relay) finish() error {
	if !s.c.ex.committed {
		s.commit()
	}
	if e := s.writeNoFlush([]byte("data: [DONE]\n\n")); e != nil {
		return e
	}
	return s.flush()
}

// streamError ends a committed stream with one terminal error event.
func (x *exchange) streamError(code string) {
	if !x.committed || x.clientGone {
		return
	}
	ev := openai.Upstream(code, false).Event()
	_, _ = x.w.Write([]byte("data: " + string(ev) + "\n\n"))
	_ = http.NewResponseController(x.w).Flush()
}

// ownID puts the router's request id where the engine wrote its leg id
// (vLLM builds response ids from X-Request-Id: "cmpl-<leg id>"), so the
// client sees one id for the request whichever attempt served it.
func (c *call) ownID(data []byte) []byte {
	leg := []byte(legID(c.rid, c.att.n, fault.Decode))
	if !bytes.Contains(data, leg) {
		return data
	}
	return bytes.ReplaceAll(data, leg, []byte(c.rid))
}
