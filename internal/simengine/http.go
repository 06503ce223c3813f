package simengine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// handler is vLLM's OpenAI-compatible HTTP surface.
func (e *Engine) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { e.generate(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { e.generate(w, r, true) })
	mux.HandleFunc("GET /v1/models", e.models)
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]string{"version": e.Compat().VLLMVersion})
	})
	mux.HandleFunc("GET /health", e.health)
	mux.HandleFunc("GET /ping", e.health)
	mux.HandleFunc("POST /tokenize", e.tokenize)
	mux.HandleFunc("POST /detokenize", e.detokenize)
	mux.HandleFunc("GET /metrics", e.metrics)
	mux.HandleFunc("GET /v1/server/devices", e.devices)
	mux.HandleFunc("POST /reset_prefix_cache", e.resetPrefixRoute)
	return e.auth(mux)
}

// auth mirrors vllm serve --api-key: only /v1, /v2 and /inference paths
// need the bearer token; /health, /version, /metrics and /tokenize do not.
func (e *Engine) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		protected := strings.HasPrefix(p, "/v1") || strings.HasPrefix(p, "/v2") || strings.HasPrefix(p, "/inference")
		if key := *e.apiKey.Load(); key != "" && protected && r.Method != http.MethodOptions &&
			r.Header.Get("Authorization") != "Bearer "+key {
			writeJSON(w, 401, map[string]string{"error": "Unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (e *Engine) health(w http.ResponseWriter, _ *http.Request) {
	if e.Faults().Unhealthy {
		w.WriteHeader(503)
		return
	}
	w.WriteHeader(200)
}

func (e *Engine) models(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	created := e.startTime.Unix()
	e.mu.Unlock()
	card := map[string]any{
		"id": e.cfg.Model, "object": "model", "created": created, "owned_by": "vllm", "root": e.cfg.Model,
		"parent": nil, "max_model_len": e.cfg.MaxModelLen,
		"permission": []any{map[string]any{
			"id": "modelperm-" + e.cfg.Model, "object": "model_permission", "created": created,
			"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false,
			"allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": nil, "is_blocking": false,
		}},
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{card}})
}

func (e *Engine) tokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string        `json:"model"`
		Prompt   *string       `json:"prompt"`
		Messages []ChatMessage `json:"messages"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&body); err != nil {
		apiError(w, 400, "BadRequestError", "invalid JSON body: "+err.Error())
		return
	}
	if body.Model != "" && body.Model != e.cfg.Model {
		apiError(w, 404, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", body.Model))
		return
	}
	var text string
	switch {
	case body.Prompt != nil:
		text = *body.Prompt
	case body.Messages != nil:
		var err error
		if text, err = ChatPrompt(body.Messages); err != nil {
			apiError(w, 400, "BadRequestError", err.Error())
			return
		}
	default:
		apiError(w, 400, "BadRequestError", "either prompt or messages is required")
		return
	}
	ids := Tokenize(text)
	writeJSON(w, 200, map[string]any{"count": len(ids), "max_model_len": e.cfg.MaxModelLen, "tokens": ids, "token_strs": nil})
}

func (e *Engine) detokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model  string  `json:"model"`
		Tokens []int64 `json:"tokens"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&body); err != nil {
		apiError(w, 400, "BadRequestError", "invalid JSON body: "+err.Error())
		return
	}
	text, err := Detokenize(body.Tokens)
	if err != nil {
		apiError(w, 400, "BadRequestError", err.Error())
		return
	}
	writeJSON(w, 200, map[string]string{"prompt": text})
}

func (e *Engine) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.model.Stats()
	g := gauges{running: st.Running, waiting: st.Waiting, deferred: e.deferred,
		kvUsage: float64(st.UsedBlocks) / float64(st.TotalBlocks), numBlocks: st.TotalBlocks, blockSize: st.BlockSize,
		startTime: float64(e.startTime.UnixNano()) / 1e9}
	_ = e.met.write(w, g)
}

// apiError writes vLLM's OpenAI error envelope.
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}
