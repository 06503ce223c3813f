package simengine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// genBody is the subset of CompletionRequest / ChatCompletionRequest the
// engine acts on; other fields (temperature, top_p, …) are accepted and
// ignored, since the simulated model is deterministic.
type genBody struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           int             `json:"min_tokens"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Stop             json.RawMessage `json:"stop"`
	ReturnTokenIDs   bool            `json:"return_token_ids"`
	Logprobs         json.RawMessage `json:"logprobs"` // chat: a boolean; completions: the top count
	TopLogprobs      *int            `json:"top_logprobs"`
	RequestID        string          `json:"request_id"`
	KVTransferParams map[string]any  `json:"kv_transfer_params"`
}

// gen is one validated generation request.
type gen struct {
	chat         bool
	id           string // response id: cmpl-<base> / chatcmpl-<base>
	modelID      string // internal engine request id (remote_request_id)
	created      int64
	prompt       []int64
	maxTokens    int
	minTokens    int
	stream       bool
	includeUsage bool
	tokenIDs     bool // return_token_ids: each choice carries the ids it generated
	logprobs     bool // each choice carries its tokens' logprobs (logprobs.go)
	topLogprobs  int  // candidates per token: chat top_logprobs, completions logprobs
	stops        []string
	prefillLeg   bool
	decode       *decodeParams
}

// decodeParams are the producer coordinates a decode leg must have.
type decodeParams struct {
	engineID, requestID, host string
	port, numTokens           int
	blockIDs                  []int
}

func (e *Engine) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	g, status, typ, msg := e.parse(r, chat)
	if status != 0 {
		apiError(w, status, typ, msg)
		return
	}
	w.Header().Set("X-Request-Id", strings.TrimPrefix(strings.TrimPrefix(g.id, "chat"), "cmpl-"))
	if e.inject500() {
		apiError(w, 500, "InternalServerError", "simulated engine failure (http_500_rate fault)")
		return
	}
	run := &genRun{e: e, g: g, w: w, r: r}
	run.serve()
}

func (e *Engine) inject500() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.faults.HTTP500Rate > 0 && e.rng.Float64() < e.faults.HTTP500Rate
}

func (e *Engine) parse(r *http.Request, chat bool) (g gen, status int, typ, msg string) {
	bad := func(format string, a ...any) (gen, int, string, string) {
		return gen{}, 400, "BadRequestError", fmt.Sprintf(format, a...)
	}
	var b genBody
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 32<<20))
	if err := dec.Decode(&b); err != nil {
		return bad("invalid JSON body: %v", err)
	}
	if b.Model != e.cfg.Model {
		return gen{}, 404, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", b.Model)
	}
	if b.N != nil && *b.N != 1 {
		return bad("n=%d is not supported by simengine; send n=1", *b.N)
	}
	var err error
	if g.prompt, err = b.promptTokens(chat); err != nil {
		return bad("%v", err)
	}
	if g.stops, err = parseStop(b.Stop); err != nil {
		return bad("%v", err)
	}
	var refusal string
	if g.maxTokens, refusal = e.maxTokens(&b, chat, len(g.prompt)); refusal != "" {
		return bad("%s", refusal)
	}
	g.chat, g.stream, g.minTokens = chat, b.Stream, b.MinTokens
	g.includeUsage = b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	g.tokenIDs = b.ReturnTokenIDs
	if g.logprobs, g.topLogprobs, refusal = parseLogprobs(&b, chat); refusal != "" {
		return bad("%s", refusal)
	}
	e.assignIDs(&g, r, b.RequestID)
	e.kvParams(&g, b.KVTransferParams)
	return g, 0, "", ""
}

// promptTokens tokenizes the chat messages or reads the completion prompt.
func (b *genBody) promptTokens(chat bool) ([]int64, error) {
	if !chat {
		return parsePrompt(b.Prompt)
	}
	if len(b.Messages) == 0 {
		return nil, fmt.Errorf("messages is required and must not be empty")
	}
	text, err := ChatPrompt(b.Messages)
	if err != nil {
		return nil, err
	}
	return Tokenize(text), nil
}

// maxTokens is the request's generation budget for a prompt of n tokens,
// refused the way vLLM refuses it when prompt plus budget passes the
// context length. The refusal is vLLM's message text, which is why it is a
// string and not an error.
func (e *Engine) maxTokens(b *genBody, chat bool, n int) (max int, refusal string) {
	limit := e.cfg.MaxModelLen
	if n >= limit {
		return 0, fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, n)
	}
	mt := b.MaxTokens
	if chat && b.MaxCompletionTokens != nil {
		mt = b.MaxCompletionTokens
	}
	switch {
	case mt == nil && chat:
		max = limit - n
	case mt == nil:
		max = 16 // the OpenAI completions default
	case *mt < 1:
		return 0, fmt.Sprintf("max_tokens must be at least 1, got %d.", *mt)
	default:
		max = *mt
	}
	if max+n > limit {
		return 0, fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			max, limit, n, max, limit, n)
	}
	return max, ""
}

// assignIDs names the request the way vLLM does: the caller's X-Request-Id
// or request_id as the base (random when neither is sent), plus a random
// suffix for the engine-internal id.
func (e *Engine) assignIDs(g *gen, r *http.Request, requestID string) {
	base := r.Header.Get("X-Request-Id")
	if base == "" {
		base = requestID
	}
	e.mu.Lock()
	if base == "" {
		base = fmt.Sprintf("%016x%016x", e.rng.Uint64(), e.rng.Uint64())
	}
	suffix := fmt.Sprintf("%08x", uint32(e.rng.Uint64()))
	g.created = e.clock.Now().Unix()
	e.mu.Unlock()
	if g.chat {
		g.id, g.modelID = "chatcmpl-"+base, "chatcmpl-"+base+"-"+suffix
	} else {
		g.id, g.modelID = "cmpl-"+base, "cmpl-"+base+"-0-"+suffix
	}
}

// kvParams reads kv_transfer_params the way NixlConnector does: unknown
// keys are ignored; a decode leg missing one of the five mandatory keys is
// prefilled locally with a warning.
func (e *Engine) kvParams(g *gen, p map[string]any) {
	if p == nil {
		return
	}
	if b, _ := p["do_remote_decode"].(bool); b {
		g.prefillLeg = true
		return
	}
	if b, _ := p["do_remote_prefill"].(bool); !b {
		return
	}
	d := decodeParams{}
	var ok [5]bool
	d.engineID, ok[0] = p["remote_engine_id"].(string)
	d.requestID, ok[1] = p["remote_request_id"].(string)
	d.host, ok[2] = p["remote_host"].(string)
	var port float64
	port, ok[3] = p["remote_port"].(float64)
	d.port = int(port)
	d.blockIDs, ok[4] = blockIDs(p["remote_block_ids"])
	if n, isNum := p["remote_num_tokens"].(float64); isNum {
		d.numTokens = int(n)
	}
	for _, v := range ok {
		if !v {
			e.log.Warn("Got invalid KVTransferParams. This request will not utilize KVTransfer", "params", p)
			return
		}
	}
	g.decode = &d
}

// blockIDs accepts a flat list or vLLM's per-KV-cache-group list of lists.
func blockIDs(v any) ([]int, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	var out []int
	for _, x := range list {
		switch t := x.(type) {
		case float64:
			out = append(out, int(t))
		case []any:
			inner, ok := blockIDs(t)
			if !ok {
				return nil, false
			}
			out = append(out, inner...)
		default:
			return nil, false
		}
	}
	return out, true
}

func parsePrompt(raw json.RawMessage) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, fmt.Errorf("prompt must not be empty")
		}
		return Tokenize(s), nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		if len(ss) != 1 {
			return nil, fmt.Errorf("simengine serves one prompt per request, got %d", len(ss))
		}
		return parsePrompt(json.RawMessage(strconv.Quote(ss[0])))
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return ids, nil
	}
	var batch [][]int64
	if json.Unmarshal(raw, &batch) == nil && len(batch) == 1 && len(batch[0]) > 0 {
		return batch[0], nil
	}
	return nil, fmt.Errorf("prompt must be a string, a list of one string, or token ids")
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, fmt.Errorf("stop must be a string or a list of strings")
	}
	return ss, nil
}

// since is a duration on the engine's clock in seconds.
func (e *Engine) since(t time.Time) float64 { return e.clock.Now().Sub(t).Seconds() }
