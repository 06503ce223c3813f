package router

import (
	"bytes"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// sink receives a decode leg's events: a relay for streaming clients, an
// assembler for the rest.
type sink interface {
	event(ev vllm.Event) *vllm.Error
	finish() *vllm.Error
}

func newSink(c *call) sink {
	if c.q.Stream {
		return &relay{c: c}
	}
	return newAssembler(c)
}

// errClientGone ends a leg whose client stopped reading.
var errClientGone = &vllm.Error{Phase: "decode", Reason: "cancelled", Msg: "client went away"}

// relay streams events to the client. Before the first token the status
// and events are held, so a failure before output still gets a real HTTP
// status; from the first token on, each event is written and flushed.
type relay struct {
	c       *call
	held    [][]byte
	heldLen int
}

// maxHeldEvents bounds the events held before the first token.
const maxHeldEvents = 64

func (s *relay) event(ev vllm.Event) *vllm.Error {
	c := s.c
	data := c.ownID(ev.Data)
	if !ev.NotJSON && !c.q.ClientTokenIDs {
		data = openai.StripTokenIDs(data)
	}
	if !c.committed && ev.Tokens == 0 && !ev.Output {
		s.held = append(s.held, data)
		s.heldLen += len(data)
		if len(s.held) > maxHeldEvents || s.heldLen > c.r.cfg.Serving.MaxResponseBytes {
			return &vllm.Error{Phase: "decode", Reason: vllm.ReasonResponseLimit, Class: "stream",
				Msg: "too much stream metadata before the first token"}
		}
		return nil
	}
	if !c.committed {
		s.commit()
	}
	return s.write(data)
}

func (s *relay) commit() {
	c := s.c
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.w.WriteHeader(http.StatusOK)
	c.committed = true
	for _, d := range s.held {
		if s.writeNoFlush(d) != nil {
			return
		}
	}
	s.held = nil
}

func (s *relay) writeNoFlush(data []byte) *vllm.Error {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.c.w.Write(buf); err != nil {
		s.c.clientGone = true
		return errClientGone
	}
	return nil
}

func (s *relay) write(data []byte) *vllm.Error {
	if e := s.writeNoFlush(data); e != nil {
		return e
	}
	if err := http.NewResponseController(s.c.w).Flush(); err != nil {
		s.c.clientGone = true
		return errClientGone
	}
	return nil
}

func (s *relay) finish() *vllm.Error {
	if !s.c.committed {
		s.commit()
	}
	return s.write([]byte("[DONE]"))
}

// streamError ends a committed stream with one terminal error event.
func (c *call) streamError(code string) {
	if !c.committed || c.clientGone {
		return
	}
	ev := openai.Upstream(code, false).Event()
	_, _ = c.w.Write([]byte("data: " + string(ev) + "\n\n"))
	_ = http.NewResponseController(c.w).Flush()
}

// ownID puts the router's request id where the engine wrote its leg id
// (vLLM builds response ids from X-Request-Id: "cmpl-<leg id>"), so the
// client sees one id for the request whichever attempt served it.
func (c *call) ownID(data []byte) []byte {
	leg := []byte(legID(c.rid, c.attempts, "decode"))
	if !bytes.Contains(data, leg) {
		return data
	}
	return bytes.ReplaceAll(data, leg, []byte(c.rid))
}
