package router

import (
	"encoding/json"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The Responses API is served as a chat completion: the same admission,
// sizing, prefill and decode placement, journal row and metrics; only
// the body going in (openai.FromResponses) and what the client hears
// (the sinks below) differ.
const (
	responsesPath = "/v1/responses"
	chatPath      = "/v1/chat/completions"
)

// responses is a Responses API call served as chat.
type responses struct {
	meta openai.ResponseMeta
}

// fromResponses translates a /v1/responses body into the chat body the
// legs run, and points the legs at the engines' chat route; other calls
// pass unchanged. On a refusal it answers and settles the call as any
// invalid request.
func (c *call) fromResponses(raw []byte) ([]byte, bool) {
	if c.ex.endpoint != responsesPath {
		return raw, true
	}
	body, err := vllm.ParseBody(raw)
	if err != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: openai.BadRequest("invalid_json", "", err.Error())})
		return nil, false
	}
	chat, q, e := openai.FromResponses(body)
	if e != nil {
		c.fail(outcome{terminal: journal.TerminalInvalid, err: e, detail: e.Message})
		return nil, false
	}
	out, err := json.Marshal(chat)
	if err != nil { // a map of raw messages from a parsed body always marshals
		c.fail(outcome{terminal: journal.TerminalFailed, reason: fault.Internal, detail: err.Error(),
			err: openai.ServerError(500, string(fault.Internal), "internal error")})
		return nil, false
	}
	c.ex.endpoint = chatPath
	c.ex.resp = &responses{meta: openai.ResponseMeta{ID: "resp_" + c.rid, ItemID: "msg_" + c.rid,
		CreatedAt: c.r.clock.Now().Unix(), Model: c.r.cfg.Model, Req: q}}
	return out, true
}

// sink is the decode leg's sink for a Responses call: a fresh fold per
// leg, so a retried attempt starts its text again.
func (p *responses) sink(c *call, ready func() bool) sink {
	f := openai.NewResponseFold(p.meta, c.r.cfg.Serving.MaxResponseBytes)
	if p.meta.Req.Stream {
		return &responsesRelay{out: &relay{c: c, ready: ready}, f: f}
	}
	return &responsesAssembler{c: c, f: f}
}

// responsesAssembler answers a client that asked for no stream with one
// Response object.
type responsesAssembler struct {
	c *call
	f *openai.ResponseFold
}

func (s *responsesAssembler) event(ev vllm.Event) error {
	_, e := s.f.Chunk(ev)
	return e
}

func (s *responsesAssembler) finish() error {
	c := s.c
	body := s.f.Body(c.sz.inputLen, c.facts.tokens)
	c.ex.w.Header().Set("Content-Type", "application/json")
	c.ex.w.WriteHeader(http.StatusOK)
	c.ex.committed = true
	if _, err := c.ex.w.Write(body); err != nil {
		c.ex.clientGone = true
	}
	return nil
}

// responsesRelay streams the Responses events. As the chat relay does,
// it holds the status until the first token, so a failure before output
// still gets a real HTTP status (and a retry); the opening events go out
// with the first text.
type responsesRelay struct {
	out   *relay // the client connection: writes, flushes, coalescing
	f     *openai.ResponseFold
	frame []byte
}

func (s *responsesRelay) event(ev vllm.Event) error {
	c := s.out.c
	delta, e := s.f.Chunk(ev)
	if e != nil {
		return e
	}
	if !c.ex.committed && ev.Tokens == 0 && !ev.Output {
		return nil // role announcements and the like: nothing a Response streams
	}
	s.frame = s.frame[:0]
	if !c.ex.committed {
		s.commit()
	}
	if delta != "" {
		s.frame = s.f.AppendDelta(s.frame, delta)
	}
	if e := s.out.writeNoFlush(s.frame); e != nil {
		return e
	}
	if s.out.ready != nil && s.out.ready() && s.out.pending < maxUnflushed {
		return nil
	}
	return s.out.flush()
}

// commit sends the status and headers, and puts the opening events in
// the frame.
func (s *responsesRelay) commit() {
	c := s.out.c
	h := c.ex.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.ex.w.WriteHeader(http.StatusOK)
	c.ex.committed = true
	s.frame = s.f.AppendStart(s.frame)
}

func (s *responsesRelay) finish() error {
	c := s.out.c
	s.frame = s.frame[:0]
	if !c.ex.committed {
		s.commit()
	}
	s.frame = s.f.AppendEnd(s.frame, c.sz.inputLen, c.facts.tokens)
	if e := s.out.writeNoFlush(s.frame); e != nil {
		return e
	}
	return s.out.flush()
}
