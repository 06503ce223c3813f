package router

import (
	"net/http"

	"github.com/narwhal-go/narwhal/internal/openai"
)

// The engines' context lengths are internal/enginelimits' (learned by the
// credential probe, probes.go); the cards and the context refusal are
// openai's.

// contextError refuses a prompt of n tokens (exact: counted, not
// estimated) that the smallest engine context cannot hold with its output.
func (c *call) contextError(n int, exact bool) *openai.Error {
	return openai.ContextError(c.r.models.Least(), n, exact, c.ex.chat, c.adm.q)
}

func (r *Router) modelCard() openai.ModelCard {
	return openai.Card(r.cfg.Model, r.epoch.Unix(), r.models.Least())
}

// serveModels is GET /v1/models: the one served model.
func (r *Router) serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, openai.Models(r.modelCard()))
}

// serveModel is GET /v1/models/{id}.
func (r *Router) serveModel(w http.ResponseWriter, q *http.Request) {
	id := q.PathValue("id")
	if id != r.cfg.Model {
		openai.ModelNotFound(id, r.cfg.Model).Write(w)
		return
	}
	writeJSON(w, 200, r.modelCard())
}
