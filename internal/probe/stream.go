package probe

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// maxStreamEvents bounds a probe stream's read: a probe asks for a
// handful of tokens, so an engine that sends this many events without
// [DONE] is broken.
const maxStreamEvents = 100000

// Decoded is what a probe's decode stream produced.
type Decoded struct {
	Tokens     int           // generated tokens (token_ids) up to [DONE]
	Text       string        // the generated text
	FirstToken time.Duration // from opening the leg to its first token; 0 when none came
}

// FirstTokenExpired reports whether e is the stream going silent before
// its first token (the FirstToken bound).
func (d Decoded) FirstTokenExpired(e error) bool {
	f := fault.As(e)
	return f != nil && f.Timeout && d.Tokens == 0
}

// ReadStream reads an open decode stream to [DONE]. Silence is bounded
// by FirstToken until the first token and by DecodeRead after it; opened
// is when the leg was sent. On an error, Decoded holds what arrived.
func (p *Prober) ReadStream(s *vllm.Stream, opened time.Time) (Decoded, error) {
	var d Decoded
	var text strings.Builder
	s.SetIdleTimeout(p.t.FirstToken)
	for range maxStreamEvents {
		ev, e := s.Next()
		if e != nil {
			d.Text = text.String()
			return d, e
		}
		if ev.Done {
			d.Text = text.String()
			return d, nil
		}
		if ev.Tokens > 0 && d.Tokens == 0 {
			d.FirstToken = time.Since(opened)
			s.SetIdleTimeout(p.t.DecodeRead)
		}
		d.Tokens += ev.Tokens
		text.WriteString(vllm.EventText(ev))
	}
	d.Text = text.String()
	return d, &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream,
		Msg: fmt.Sprintf("stream sent %d events without the [DONE] terminator", maxStreamEvents)}
}

// Stream asks iid for a stream of exactly n tokens directly and reads it
// to [DONE], all within FirstToken: nil when all n came. An engine ejected
// for cutting streams must pass it, since a short or non-streamed probe
// passes on an engine that cuts long streams.
func (p *Prober) Stream(ctx context.Context, iid string, n int) error {
	ctx, cancel := bound(ctx, p.t.FirstToken)
	defer cancel()
	body := p.body("narwhal stream probe", n, map[string]any{"stream": true, "min_tokens": n, "return_token_ids": true})
	opened := time.Now()
	s, e := p.Client(iid).OpenStream(ctx, "/v1/completions", body, "narwhal-stream-probe-"+iid)
	if e != nil {
		return e
	}
	defer s.Close()
	d, e := p.ReadStream(s, opened)
	if e != nil {
		return e
	}
	if d.Tokens < n {
		return &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassOutputCut,
			Msg: fmt.Sprintf("stream probe ended after %d of %d tokens", d.Tokens, n)}
	}
	return nil
}
