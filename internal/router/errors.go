package router

import (
	"fmt"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// apiError is an OpenAI-shaped error (openai.Error, which owns the shape
// and the constructors) as a call's outcome carries it. The router's
// handlers answer through write and the constructors below.
type apiError openai.Error

// write sends the error (openai.Error.Write).
func (e *apiError) write(w http.ResponseWriter) { (*openai.Error)(e).Write(w) }

// wire adopts an openai error as a call's outcome; the constructors below
// are openai's, returning what an outcome carries.
func wire(e *openai.Error) *apiError { return (*apiError)(e) }

const typeServer = openai.TypeServer

func strp(s string) *string { return &s }

func badRequest(code, param, msg string) *apiError { return wire(openai.BadRequest(code, param, msg)) }

func invalid(status int, code, msg string) *apiError { return wire(openai.Invalid(status, code, msg)) }

func overloaded(code, msg string, retryAfter int) *apiError {
	return wire(openai.Overloaded(code, msg, retryAfter))
}

func unavailable(code, msg string) *apiError { return wire(openai.Unavailable(code, msg)) }

func serverError(status int, code, msg string) *apiError {
	return wire(openai.ServerError(status, code, msg))
}

func legError(phase string, e *vllm.Error) *apiError { return wire(openai.LegError(phase, e)) }

// refusalError is what a predictive refusal means to the client. A prompt
// whose own prefill cannot meet the TTFT target is the client's to fix, so
// it is a 400 saying how (the reference answers 429, which every SDK
// retries in vain); the others are load that passes, 429 with Retry-After.
func (c *call) refusalError(ref *sched.Refusal, pl sched.Placement) *apiError {
	if ref.Cause != sched.CausePrompt {
		return overloaded(ref.Cause, ref.Message, ref.RetryAfter)
	}
	param := "prompt"
	if c.chat {
		param = "messages"
	}
	s := c.r.cfg
	budget := s.SLO.TTFT * (1 + s.Serving.AdmissionMargin)
	return badRequest("prompt_exceeds_ttft_slo", param, fmt.Sprintf(
		"the prompt (%d tokens) alone takes about %.3gs to prefill on the fastest engine, over the TTFT target of %gs "+
			"(slo.ttft_s × (1 + serving.admission_margin)): shorten the prompt, or raise slo.ttft_s", c.inputLen, pl.OwnPrefill, budget))
}
