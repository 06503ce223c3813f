package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Failure kinds of a KV-transfer probe (preflight's failure_kind).
const (
	KindFirstTokenDeadline = "deadline_exceeded"
	KindRequestDeadline    = "request_deadline_exceeded"
	KindTransferFailed     = "transfer_failed"
	KindNoTokens           = "no_tokens"
	KindOutputMismatch     = "output_mismatch"
)

// Transfer shapes a KV-transfer probe. Its prompt is decoded to exactly
// Tokens tokens (min_tokens = max_tokens, ignore_eos, temperature 0) with
// a fresh cache_salt, so the consumer cannot answer from a prefix cache.
type Transfer struct {
	Prompt string // default "narwhal transfer probe"
	Tokens int    // default 2
	// Reference also runs the prompt aggregated on the consumer and
	// requires the decoded text to equal it: a corrupted transfer decodes
	// other text.
	Reference bool
	// Label prefixes the legs' request ids; default "narwhal-probe".
	Label string
}

func (t Transfer) withDefaults() Transfer {
	t.Prompt = cmp.Or(t.Prompt, "narwhal transfer probe")
	t.Tokens = cmp.Or(max(t.Tokens, 0), 2)
	t.Label = cmp.Or(t.Label, "narwhal-probe")
	return t
}

// Transferred is a passed KV-transfer probe.
type Transferred struct {
	Decoded
	Handoff *vllm.Handoff // what the producer returned
}

// TransferError is a failed KV-transfer probe.
type TransferError struct {
	Kind     string // one of the Kind constants
	Src, Dst string // producer and consumer
	Err      error
	msg      string
}

func (e *TransferError) Error() string { return e.msg }

// Unwrap is the engine failure, when there was one.
func (e *TransferError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// prompt is the probe's completions body with salt as its cache_salt.
func (p *Prober) prompt(t Transfer, salt string) []byte {
	return p.body(t.Prompt, t.Tokens, map[string]any{"min_tokens": t.Tokens, "ignore_eos": true, "temperature": 0, "cache_salt": salt})
}

// Produce runs a producer leg of t's prompt on iid within Prefill and
// returns the validated handoff.
func (p *Prober) Produce(ctx context.Context, iid string, t Transfer) (*vllm.Handoff, error) {
	t = t.withDefaults()
	return p.produce(ctx, iid, t, p.ids.NewID())
}

func (p *Prober) produce(ctx context.Context, iid string, t Transfer, salt string) (*vllm.Handoff, error) {
	ctx, cancel := bound(ctx, p.t.Prefill)
	defer cancel()
	return p.Client(iid).Prefill(ctx, "/v1/completions", vllm.PrefillBody(p.promptBody(t, salt), p.cfg.Model), t.Label+"-"+salt+"-prefill")
}

// promptBody is prompt as a body the legs are shaped from.
func (p *Prober) promptBody(t Transfer, salt string) vllm.Body {
	body, err := vllm.ParseBody(p.prompt(t, salt))
	if err != nil {
		panic(fmt.Sprintf("probe: a probe body does not parse: %v", err)) // marshalled from a map
	}
	return body
}

// errRequestDeadline is the cause of a KV probe's own Request bound.
var errRequestDeadline = errors.New("request deadline")

// KVTransfer moves KV from src to dst, all within Request: a producer leg
// on src, a streamed decode on dst with src's handoff that must produce
// tokens (ReadStream's bounds), and with t.Reference an aggregated run on
// dst whose text must equal the decoded text. A failure is a
// *TransferError.
func (p *Prober) KVTransfer(ctx context.Context, src, dst string, t Transfer) (Transferred, error) {
	t = t.withDefaults()
	ctx, cancel := p.requestBound(ctx)
	defer cancel()
	salt := p.ids.NewID()
	h, e := p.produce(ctx, src, t, salt)
	if e != nil {
		return Transferred{}, transferError(KindTransferFailed, src, dst, e, "prefill leg on %s: %s", src, fault.Detail(e))
	}
	d, fail := p.consume(ctx, dst, t, salt, h)
	res := Transferred{Decoded: d, Handoff: h}
	if fail != nil {
		fail.Src = src
		if context.Cause(ctx) == errRequestDeadline {
			fail.Kind, fail.msg = KindRequestDeadline, fmt.Sprintf("request deadline %gs expired (serving.request_timeout_s)", p.t.Request.Seconds())
		}
		return res, fail
	}
	if !t.Reference {
		return res, nil
	}
	agg, e := p.Client(dst).Complete(ctx, p.prompt(t, p.ids.NewID()))
	if e != nil {
		return res, transferError(KindTransferFailed, src, dst, e, "aggregated reference run on %s: %s", dst, fault.Detail(e))
	}
	if agg.Text != d.Text {
		return res, transferError(KindOutputMismatch, src, dst, nil, "decoded text %q differs from an aggregated run's %q: the KV arrived corrupted; do not route this pair", d.Text, agg.Text)
	}
	return res, nil
}

// requestBound is the Request bound of a whole KV probe, with
// errRequestDeadline as its cause.
func (p *Prober) requestBound(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.t.Request <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, p.t.Request, errRequestDeadline)
}

func transferError(kind, src, dst string, e error, format string, args ...any) *TransferError {
	return &TransferError{Kind: kind, Src: src, Dst: dst, Err: e, msg: fmt.Sprintf(format, args...)}
}

// consume opens the decode leg on dst with h and reads it to [DONE].
func (p *Prober) consume(ctx context.Context, dst string, t Transfer, salt string, h *vllm.Handoff) (Decoded, *TransferError) {
	opened := time.Now()
	body := vllm.DecodeBody(p.promptBody(t, salt), p.cfg.Model, h.Params)
	s, e := p.Client(dst).OpenStream(ctx, "/v1/completions", body, t.Label+"-"+salt+"-decode")
	if e != nil {
		return Decoded{}, transferError(KindTransferFailed, "", dst, e, "decode leg on %s: %s", dst, fault.Detail(e))
	}
	defer s.Close()
	d, e := p.ReadStream(s, opened)
	switch {
	case d.FirstTokenExpired(e):
		return d, transferError(KindFirstTokenDeadline, "", dst, e,
			"first-token deadline %gs expired; transfer remains unconfirmed: run first-token calibration", p.t.FirstToken.Seconds())
	case e != nil:
		return d, transferError(KindTransferFailed, "", dst, e, "decode leg on %s: %s", dst, fault.Detail(e))
	case d.Tokens == 0:
		return d, transferError(KindNoTokens, "", dst, nil, "accepted the handoff and produced no tokens")
	}
	return d, nil
}
