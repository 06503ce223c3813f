package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// surfaceRoutes are the rest of vLLM's HTTP surface the router answers:
// the tokenizer routes (passed to a live engine), the Responses API
// (served in two legs like chat, responses.go), and vLLM's pooling routes
// (refused: this fleet serves generation).
func (r *Router) surfaceRoutes() []route {
	table := []route{
		{"POST /tokenize", http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) { r.serveTokenization(w, q, "/tokenize") })},
		{"POST /detokenize", http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) { r.serveTokenization(w, q, "/detokenize") })},
		{"POST " + responsesPath, r.traced(func(w http.ResponseWriter, q *http.Request) { r.serveCompletion(w, q, true) })},
	}
	// vLLM serves stored responses back (GET /v1/responses/{id}, POST
	// .../cancel: https://github.com/vllm-project/vllm/blob/f6e93254b87059a005c9043f4c72322994aff95a/vllm/entrypoints/openai/responses/api_router.py);
	// this router stores none, and says so rather than "Invalid URL".
	for _, p := range []string{"GET " + responsesPath + "/{id}", "DELETE " + responsesPath + "/{id}",
		"POST " + responsesPath + "/{id}/cancel", "GET " + responsesPath + "/{id}/input_items"} {
		table = append(table, route{p, http.HandlerFunc(serveNoStoredResponse)})
	}
	for _, p := range poolingPaths {
		table = append(table, route{"POST " + p, http.HandlerFunc(servePooling)})
	}
	return table
}

// poolingPaths are vLLM's pooling-model routes: embeddings
// (vllm/entrypoints/pooling/embed/api_router.py), score and rerank
// (pooling/score/api_router.py), pooling (pooling/pooling/api_router.py)
// and classify (pooling/classify/api_router.py), as of
// https://github.com/vllm-project/vllm commits 0193ccc0f01a30b4df8eb00f8809f32c68afc827,
// 4159f5ba771cb20944234e8e7931ccf9e4258bfb, f6e93254b87059a005c9043f4c72322994aff95a
// and 3de3fd69565270349cb8957b05771da13e7f5b3c.
var poolingPaths = []string{"/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"}

// servePooling answers a pooling route 404 in OpenAI's shape: the engines
// behind this router run a generative model split into prefill and
// decode legs, and no pooling model. 404 (not 400 or 5xx) so no SDK
// retries it.
func servePooling(w http.ResponseWriter, q *http.Request) {
	openai.Invalid(404, "pooling_not_served", fmt.Sprintf(
		"%s is a pooling route (embeddings, score, rerank, classify, pooling): this fleet serves generation "+
			"(POST /v1/completions, /v1/chat/completions, /v1/responses), not pooling; send it to a vLLM serving a pooling model", q.URL.Path)).Write(w)
}

// serveNoStoredResponse answers a request for a stored response: 404,
// as for an id never stored, naming why.
func serveNoStoredResponse(w http.ResponseWriter, q *http.Request) {
	openai.Invalid(404, "response_not_found", fmt.Sprintf("No response with id %q: this router stores no responses "+
		"(store: true is refused); keep the Response you were sent", q.PathValue("id"))).Write(w)
}

// serveTokenization passes a /tokenize or /detokenize body to the live
// engine with the fewest resident requests, moving to another on a
// transient failure, as admission counting does (call.tokenize). It is
// not a generation request: no admission seat, no journal row, no request
// id (docs/router.md, "Tokenizer routes").
func (r *Router) serveTokenization(w http.ResponseWriter, q *http.Request, path string) {
	r.inflight.Add(1)
	defer r.inflight.Done()
	if o, bad := r.controlGate(); bad {
		o.err.Write(w)
		return
	}
	body, e := r.readTokenizationBody(w, q)
	if e != nil {
		w.Header().Set("Connection", "close")
		e.Write(w)
		return
	}
	ctx, cancel := context.WithTimeout(q.Context(), units.Seconds(r.cfg.Serving.RequestTimeoutS))
	defer cancel()
	var answer []byte
	none := &fault.Error{Phase: fault.Admission, Reason: fault.EngineUnreachable, Msg: "no live engine"}
	asked, ve := r.onLiveEngine(ctx, none, func(ctx context.Context, cl *vllm.Client) (err error) {
		answer, err = cl.Tokenization(ctx, path, body)
		return err
	})
	if ve != nil {
		tokenizationError(fault.Of(ve, fault.Admission), asked).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
}

// tokenizationError is the client's answer to a failed pass-through: the
// engine's own refusal with its status, a 503 when no engine was live,
// else upstream's 502 or 504.
func tokenizationError(e *fault.Error, asked int) *openai.Error {
	if asked == 0 {
		return openai.Unavailable("backend_unavailable", "no live engine to tokenize on")
	}
	return openai.LegError("tokenize", e)
}

// readTokenizationBody reads the body within the body deadline and
// serving.max_request_bytes, and checks what the router must: a JSON
// object whose model, when given, is the served one (engines may serve
// it under the same name only).
func (r *Router) readTokenizationBody(w http.ResponseWriter, q *http.Request) ([]byte, *openai.Error) {
	limit := int64(r.cfg.Serving.MaxRequestBytes)
	rc := http.NewResponseController(w)
	bounded := rc.SetReadDeadline(time.Now().Add(r.httpOpts.BodyReadTimeout)) == nil
	raw, err := io.ReadAll(io.LimitReader(q.Body, limit+1))
	if bounded {
		_ = rc.SetReadDeadline(time.Time{})
	}
	switch {
	case err != nil:
		return nil, openai.Invalid(408, "body_read_timeout", "the request body did not arrive in time; send it in one go")
	case int64(len(raw)) > limit:
		return nil, openai.Invalid(413, "request_too_large", "request body exceeds max_request_bytes")
	}
	var fields struct {
		Model *string `json:"model"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, openai.BadRequest("invalid_json", "", "the body must be a JSON object")
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, openai.InvalidType("model", "model must be a string")
		}
		return nil, openai.BadRequest("invalid_json", "", "the body is not valid JSON: "+err.Error())
	}
	if fields.Model != nil && *fields.Model != r.cfg.Model {
		return nil, openai.ModelNotFound(*fields.Model, r.cfg.Model)
	}
	return raw, nil
}

// onLiveEngine runs try on the live engine with the fewest resident
// requests, moving to another on a transient failure, up to
// serving.max_attempts tries; an engine that gave no answer at all uses
// no try (unanswered) and is reported to its breaker (a dropped call is a
// dead engine). It returns how many engines were asked, and none when
// there was no live engine to ask.
func (r *Router) onLiveEngine(ctx context.Context, none *fault.Error, try func(context.Context, *vllm.Client) error) (int, error) {
	tried := map[string]bool{}
	last := none
	for tries := 0; tries < r.cfg.Serving.MaxAttempts; {
		iid := r.leastLoaded(tried)
		if iid == "" {
			break
		}
		tried[iid] = true
		tctx, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Engine.TokenizeTimeoutS))
		err := try(tctx, r.engines[iid].client)
		cancel()
		if err == nil {
			return len(tried), nil
		}
		e := fault.Of(err, none.Phase)
		last = e
		if ctx.Err() == nil && unanswered(e) {
			r.reportLeg(avail.Failure{IID: iid, Err: e})
			continue
		}
		tries++
		if !e.Transient() || ctx.Err() != nil {
			break
		}
	}
	return len(tried), last
}
