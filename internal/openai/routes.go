package openai

import (
	"fmt"
	"net/http"
	"strings"
)

// NotRouted answers a request no route takes, in OpenAI's error shape
// rather than the mux's text/plain: 405 with Allow when the path is
// served under other methods (a route of known), else 404.
func NotRouted(w http.ResponseWriter, q *http.Request, known *http.ServeMux) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := q.Clone(q.Context())
		probe.Method = m
		if _, pattern := known.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		Invalid(405, "method_not_allowed",
			fmt.Sprintf("%s is not allowed on %s; use %s", q.Method, q.URL.Path, strings.Join(allow, " or "))).Write(w)
		return
	}
	Invalid(404, "not_found",
		fmt.Sprintf("Invalid URL (%s %s): this router serves POST /v1/completions, /v1/chat/completions and /v1/responses, GET /v1/models, and POST /tokenize and /detokenize", q.Method, q.URL.Path)).Write(w)
}
