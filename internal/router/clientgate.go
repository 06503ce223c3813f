package router

import (
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// The client gate guards /v1/* as vLLM's --api-key does: every path
// under /v1 needs a key, OPTIONS (a CORS preflight) does not, and
// /health, /ready and /metrics stay open for probes:
// https://github.com/vllm-project/vllm/blob/baaf6e9c171b38e155d4191ac29f3a4a08817146/vllm/entrypoints/serve/middleware/authenticate.py
// (keys from --api-key or VLLM_API_KEY:
// https://github.com/vllm-project/vllm/blob/0001948bc76939369ca855c90b36d81256477e85/vllm/entrypoints/openai/api_server.py).
// vLLM answers {"error":"Unauthorized"}; the router answers in OpenAI's
// error shape, which the SDKs parse, with WWW-Authenticate: Bearer.
//
// Order: CORS headers first (so a listed page can read even a refusal),
// then the preflight, then the key. The media type is checked per
// completion (mediaGate), after the key and before the body is read.
// A 401 writes no journal row: it is not a request of the service, and
// an unauthenticated client must not be able to grow the journal.
type clientGate struct {
	keys httpguard.ClientKeys
	cors httpguard.CORS
}

func newClientGate(keys, origins []string) clientGate {
	return clientGate{keys: httpguard.NewClientKeys(keys), cors: httpguard.NewCORS(origins)}
}

// guarded reports whether path is under /v1, as vLLM's prefix test.
func guarded(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

// wrap puts the gate in front of next for /v1/*; other paths pass.
func (g clientGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !guarded(req.URL.Path) {
			next.ServeHTTP(w, req)
			return
		}
		g.cors.Decorate(w.Header(), req)
		if httpguard.IsPreflight(req) {
			if e := g.cors.Preflight(w.Header(), req); e != nil {
				e.Write(w)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if e := g.keys.KeyRefusal(req); e != nil {
			w.Header().Set("WWW-Authenticate", "Bearer")
			e.Write(w)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// mediaGate refuses a completion whose body is not declared JSON, before
// the body is read and so before any engine sees it: a browser page can
// send a text/plain POST to any address without a preflight, and that
// must not become a completion. The refusal is the call's journal row
// (terminal invalid). vLLM refuses the same media types in
// validate_json_request (as a 400 validation error; the router keeps
// HTTP's 415):
// https://github.com/vllm-project/vllm/blob/432a38c440655622ff7875c4877f0756c44e1fbf/vllm/entrypoints/openai/utils.py
func (c *call) mediaGate() bool {
	e := httpguard.MediaRefusal(c.ex.req)
	if e == nil {
		return true
	}
	c.fail(outcome{terminal: journal.TerminalInvalid, err: e, detail: e.Message})
	return false
}
