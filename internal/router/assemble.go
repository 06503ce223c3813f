package router

import (
	"net/http"

	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// assembler is the sink for a client that did not ask for a stream: it
// folds the decode stream (openai.Assembler) and answers with one
// response.
type assembler struct {
	c *call
	a *openai.Assembler
}

func newAssembler(c *call) *assembler {
	return &assembler{c: c, a: openai.NewAssembler(c.ex.chat, c.r.cfg.Serving.MaxResponseBytes, c.ownID)}
}

func (s *assembler) event(ev vllm.Event) error { return s.a.Event(ev) }

func (s *assembler) finish() error {
	c := s.c
	body, e := s.a.Body(c.sz.inputLen, c.facts.tokens)
	if e != nil {
		return e
	}
	h := c.ex.w.Header()
	h.Set("Content-Type", "application/json")
	c.ex.w.WriteHeader(http.StatusOK)
	c.ex.committed = true
	if _, err := c.ex.w.Write(body); err != nil {
		c.ex.clientGone = true
	}
	return nil
}
