package router

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// modelLimits is what the engines report about the served model on their
// /v1/models: the context length (max_model_len) of each.
type modelLimits struct {
	mu    sync.Mutex     // guards byIID
	byIID map[string]int // iid → max_model_len it last reported
}

// modelLimitsRefresh is how often the engines are asked again when no liveness
// sweep does it (recovery.liveness_every 0): an engine
// restarted with another --max-model-len is seen within it.
const modelLimitsRefresh = 30 * time.Second

// maxModelLen is the smallest context length any engine reported, since
// either leg may land on any of them; 0 when none has reported one.
func (r *Router) maxModelLen() int {
	m := &r.models
	m.mu.Lock()
	defer m.mu.Unlock()
	least := 0
	for _, n := range m.byIID {
		if n > 0 && (least == 0 || n < least) {
			least = n
		}
	}
	return least
}

// learnModelLimits asks every engine's /v1/models at once, each bounded by
// engine.health_timeout_s. An engine that does not answer keeps what it
// reported before. Only needed while liveness sweeps are off: otherwise
// every sweep's credential probe reads the same document.
func (r *Router) learnModelLimits(ctx context.Context) {
	avail.ForEach(ctx, r.order, func(ctx context.Context, iid string) {
		c := r.probe.Credential(ctx, iid)
		if c.Err != nil {
			r.log.Debug("engine /v1/models unavailable; its context length stays as last seen", "iid", iid, "err", c.Err.Msg)
			return
		}
		r.noteModelCards(iid, c.Cards)
	})
}

// noteModelCards records the served model's max_model_len from an
// engine's /v1/models answer.
func (r *Router) noteModelCards(iid string, cards []vllm.ModelCard) {
	for _, card := range cards {
		if card.ID == r.cfg.Model {
			r.setModelLen(iid, card.MaxModelLen)
		}
	}
}

func (r *Router) setModelLen(iid string, n int) {
	m := &r.models
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byIID == nil {
		m.byIID = map[string]int{}
	}
	m.byIID[iid] = n
}

// watchModelLimits refreshes the context lengths until the router closes.
func (r *Router) watchModelLimits(ctx context.Context) {
	t := r.clock.NewTicker(modelLimitsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			r.learnModelLimits(ctx)
		}
	}
}

// contextError refuses a prompt that cannot fit the model's context, or
// one whose requested output would not fit beside it, the way vLLM would
// after the router had paid for a leg. exact says n is a real token
// count; an estimate is checked only as the one token a prompt has at
// least.
func (c *call) contextError(n int, exact bool) *openai.Error {
	limit := c.r.maxModelLen()
	if limit == 0 {
		return nil
	}
	param := "prompt"
	if c.chat {
		param = "messages"
	}
	if !exact {
		n = 1
	}
	if n >= limit {
		return openai.BadRequest("context_length_exceeded", param, fmt.Sprintf(
			"the prompt has %d tokens; the model's context is %d tokens (max_model_len) and must also hold the output: shorten the prompt",
			n, limit))
	}
	if c.wanted > 0 && n+c.wanted > limit {
		return openai.BadRequest("context_length_exceeded", c.wantedParam, fmt.Sprintf(
			"%s %d and the prompt's %d tokens exceed the model's context of %d tokens (max_model_len): ask for at most %d",
			c.wantedParam, c.wanted, n, limit, limit-n))
	}
	return nil
}

// modelCard is one entry of GET /v1/models.
type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen *int   `json:"max_model_len,omitempty"` // null until an engine reported it
}

func (r *Router) modelCard() modelCard {
	card := modelCard{ID: r.cfg.Model, Object: "model", Created: r.epoch.Unix(), OwnedBy: "narwhal"}
	if n := r.maxModelLen(); n > 0 {
		card.MaxModelLen = &n
	}
	return card
}

// serveModels is GET /v1/models: the one served model.
func (r *Router) serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", []modelCard{r.modelCard()}})
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
