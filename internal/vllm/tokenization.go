package vllm

import (
	"context"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Tokenization posts a client's own /tokenize or /detokenize body to the
// engine and returns the engine's 200 answer as it sent it: the router
// passes these routes through (docs/router.md, "Tokenizer routes") rather
// than re-encoding vLLM's TokenizeResponse / DetokenizeResponse, whose
// fields (count, max_model_len, tokens, token_strs; prompt) it does not
// own. A status other than 200 is a *fault.Error with the engine's sanitized
// detail, as for every engine call. The request and answer models are
// vLLM's TokenizeRequest / TokenizeResponse and DetokenizeRequest /
// DetokenizeResponse,
// https://github.com/vllm-project/vllm/blob/030ea52effcb05071543c8c42b8f0145e94cee43/vllm/entrypoints/serve/tokenize/protocol.py,
// served at POST /tokenize and /detokenize by
// https://github.com/vllm-project/vllm/blob/045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0/vllm/entrypoints/serve/tokenize/api_router.py.
func (c *Client) Tokenization(ctx context.Context, path string, body []byte) ([]byte, error) {
	return c.call(ctx, fault.Admission, http.MethodPost, path, body, "", c.max)
}
