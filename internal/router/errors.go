package router

import (
	"net/http"

	"github.com/narwhal-go/narwhal/internal/openai"
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
