package simengine

import (
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/enginemodel"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// genRun serves one generation request from KV to the last byte.
type genRun struct {
	e       *Engine
	g       gen
	w       http.ResponseWriter
	r       *http.Request
	fl      http.Flusher
	arrived time.Time

	digest     uint64
	cached     int // prompt tokens with KV here before the request ran
	text       strings.Builder
	sent       int // bytes of text already streamed
	tokens     int
	pending    []int64 // ids generated since the last chunk
	lpPos      []int   // positions of the output tokens, for logprobs
	lpSent     int     // of lpPos, those a chunk carried
	lpOffset   int     // text length the chunks' logprobs covered
	finish     string
	stopReason any
	buf        []byte
}

func (x *genRun) serve() {
	e, g := x.e, &x.g
	x.arrived = e.clock.Now()
	x.fl, _ = x.w.(http.Flusher)
	if g.stream {
		h := x.w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		x.w.WriteHeader(200) // vLLM commits to 200 before the engine runs
		x.flush()
	}
	x.digest = KVDigest(e.cfg.Model, g.prompt)
	cached := 0
	if g.decode != nil {
		kv, err := x.pullKV()
		if err != nil {
			x.fail(err.Error())
			return
		}
		x.digest, cached = kv.digest, min(kv.numTokens, len(g.prompt))
		e.mu.Lock()
		e.prefixTrackLocked(g.modelID, g.prompt)
		e.mu.Unlock()
	} else {
		e.mu.Lock()
		cached = e.prefixHitLocked(g.modelID, g.prompt)
		e.met.add("vllm:prefix_cache_queries_total", "", float64(len(g.prompt)))
		e.met.add("vllm:prefix_cache_hits_total", "", float64(cached))
		e.met.add("vllm:prompt_tokens_by_source_total", `source="local_cache_hit"`, float64(cached))
		e.met.add("vllm:prompt_tokens_by_source_total", `source="local_compute"`, float64(len(g.prompt)-cached))
		e.mu.Unlock()
	}
	x.cached = cached
	s := newSink(x.arrived)
	e.mu.Lock()
	gen := e.generation
	e.mu.Unlock()
	if err := e.submit(x.modelRequest(cached), s); err != nil {
		x.fail(err.Error())
		return
	}
	if !x.consume(s) {
		return
	}
	x.complete(gen)
}

func (x *genRun) pullKV() (remoteKV, error) {
	e, g := x.e, &x.g
	e.mu.Lock()
	e.deferred++
	e.mu.Unlock()
	start := e.clock.Now()
	kv, err := e.pull(x.r.Context(), *g.decode)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deferred--
	if err != nil {
		e.met.add("vllm:nixl_num_failed_transfers_total", "", 1)
		e.log.Error("KV load failed; finishing the request with an error (kv_load_failure_policy=fail)", "request_id", g.modelID, "err", err)
		return kv, err
	}
	n := float64(min(kv.numTokens, len(g.prompt)))
	e.met.observe("vllm:nixl_xfer_time_seconds", e.since(start))
	e.met.observe("vllm:nixl_bytes_transferred", float64(kv.bytes))
	e.met.add("vllm:prefix_cache_queries_total", "", float64(len(g.prompt)))
	e.met.add("vllm:external_prefix_cache_queries_total", "", float64(len(g.prompt)))
	e.met.add("vllm:external_prefix_cache_hits_total", "", n)
	e.met.add("vllm:prompt_tokens_by_source_total", `source="external_kv_transfer"`, n)
	e.met.add("vllm:prompt_tokens_by_source_total", `source="local_compute"`, float64(len(g.prompt))-n)
	return kv, nil
}

func (x *genRun) modelRequest(cached int) enginemodel.Request {
	return enginemodel.Request{ID: x.g.modelID, PromptTokens: len(x.g.prompt), MaxTokens: x.g.maxTokens,
		CachedTokens: cached, Hold: x.g.prefillLeg}
}

// consume relays tokens until the request finishes. It returns false when
// the request ended without a normal finish (client gone, connection cut).
func (x *genRun) consume(s *sink) bool {
	e := x.e
	var evs []evt
	for x.finish == "" {
		select {
		case <-s.notify:
		case <-x.r.Context().Done():
			e.stop(x.g.modelID, false)
			x.record("abort")
			return false
		case <-e.ctx.Done():
			panic(http.ErrAbortHandler)
		}
		evs = s.take(evs)
		for _, ev := range evs {
			if ev.kind == evAbort {
				panic(http.ErrAbortHandler) // the process "died": cut the connection
			}
			if ev.kind == evToken && x.finish == "" {
				x.token(ev.index)
			}
		}
	}
	return true
}

// token appends output token i, applies stop strings and the drop fault,
// and streams it.
func (x *genRun) token(i int) {
	g := &x.g
	prev := x.text.Len()
	word := TokenText(x.digest, i)
	x.text.WriteString(word)
	x.pending = append(x.pending, Tokenize(word)...)
	x.lpPos = append(x.lpPos, i)
	x.tokens++
	if x.tokens >= g.maxTokens {
		x.finish = "length"
	}
	if len(g.stops) > 0 && x.tokens >= g.minTokens {
		x.applyStop(prev)
	}
	if x.finish == "stop" {
		x.e.stop(g.modelID, g.prefillLeg)
	}
	if !g.stream {
		return
	}
	x.writeChunk()
	if n := x.e.Faults().DropAfterTokens; n > 0 && x.tokens >= n && x.finish == "" {
		x.e.stop(g.modelID, false)
		panic(http.ErrAbortHandler)
	}
}

// applyStop ends generation at the first stop string; the stop string is
// not part of the output, as in vLLM.
func (x *genRun) applyStop(prev int) {
	full := x.text.String()
	from := 0
	for _, st := range x.g.stops {
		from = max(0, prev-len(st))
		if st == "" {
			continue
		}
		if i := strings.Index(full[from:], st); i >= 0 {
			x.text.Reset()
			x.text.WriteString(full[:from+i])
			x.finish, x.stopReason = "stop", st
			return
		}
	}
}

func (x *genRun) usage() map[string]any {
	p, c := len(x.g.prompt), x.tokens
	var details any
	if x.e.cfg.Prefix.PromptTokensDetails {
		details = map[string]int{"cached_tokens": x.cached}
	}
	return map[string]any{"prompt_tokens": p, "total_tokens": p + c, "completion_tokens": c, "prompt_tokens_details": details}
}

// writeChunk streams the text not yet sent, with the finish reason when
// this is the last token.
func (x *genRun) writeChunk() {
	g := &x.g
	full := x.text.String()
	delta := ""
	if len(full) > x.sent {
		delta = full[x.sent:]
	}
	x.sent = len(full)
	if g.chat && x.tokens == 1 {
		x.event(x.chatChunk(`{"role":"assistant","content":""}`, "null", "null"))
	}
	fin, stop := "null", "null"
	if x.finish != "" {
		fin = strconv.Quote(x.finish)
		if s, ok := x.stopReason.(string); ok {
			b, _ := json.Marshal(s)
			stop = string(b)
		}
	}
	b, _ := json.Marshal(delta)
	ids, lp := x.takeIDs(), x.takeLogprobs(false)
	if g.chat {
		x.event(x.chatChunkLP(`{"content":`+string(b)+`}`, lp, fin, stop+ids))
	} else {
		x.event(x.prefix("text_completion") + `"choices":[{"index":0,"text":` + string(b) +
			`,"logprobs":` + lp + `,"finish_reason":` + fin + `,"stop_reason":` + stop + ids + `}]}`)
	}
}

// takeIDs renders the pending token ids as vLLM's per-choice token_ids
// field when the request asked for them (return_token_ids), "" otherwise.
func (x *genRun) takeIDs() string {
	if !x.g.tokenIDs {
		return ""
	}
	b, _ := json.Marshal(x.pending)
	x.pending = x.pending[:0]
	return `,"token_ids":` + string(b)
}

func (x *genRun) chatChunk(delta, fin, stop string) string {
	return x.chatChunkLP(delta, "null", fin, stop)
}

// chatChunkLP is a chat chunk whose choice carries logprobs lp.
func (x *genRun) chatChunkLP(delta, lp, fin, stop string) string {
	return x.prefix("chat.completion.chunk") + `"choices":[{"index":0,"delta":` + delta +
		`,"logprobs":` + lp + `,"finish_reason":` + fin + `,"stop_reason":` + stop + `}]}`
}

func (x *genRun) prefix(object string) string {
	return `{"id":"` + x.g.id + `","object":"` + object + `","created":` + strconv.FormatInt(x.g.created, 10) +
		`,"model":` + strconv.Quote(x.e.cfg.Model) + `,`
}

func (x *genRun) event(data string) {
	x.buf = append(x.buf[:0], "data: "...)
	x.buf = append(x.buf, data...)
	x.buf = append(x.buf, "\n\n"...)
	_, _ = x.w.Write(x.buf)
	x.flush()
}

func (x *genRun) flush() {
	if x.fl != nil {
		x.fl.Flush()
	}
}

// complete ends a finished request: lease for a prefill leg, final usage
// chunk and [DONE] for a stream, the whole body otherwise.
func (x *genRun) complete(gen int) {
	e, g := x.e, &x.g
	var kvp any
	if g.prefillLeg {
		if ids, ok := e.hold(g.modelID, x.digest, len(g.prompt), gen); ok {
			kvp = map[string]any{
				"do_remote_prefill": true, "do_remote_decode": false, "remote_engine_id": e.EngineID(),
				"remote_block_ids": ids, "remote_request_id": g.modelID, "remote_host": e.cfg.SideChannelHost,
				"remote_port": e.scPort(), "tp_size": 1, "remote_num_tokens": len(g.prompt),
			}
		}
	} else {
		e.done(g.modelID)
	}
	x.record(x.finish)
	if g.stream {
		if g.includeUsage {
			x.event(x.prefix(map[bool]string{true: "chat.completion.chunk", false: "text_completion"}[g.chat]) +
				`"choices":[],"usage":` + mustJSON(x.usage()) + `}`)
		}
		x.event("[DONE]")
		return
	}
	choice := map[string]any{"index": 0, "logprobs": json.RawMessage(x.takeLogprobs(true)), "finish_reason": x.finish, "stop_reason": x.stopReason}
	body := map[string]any{"id": g.id, "created": g.created, "model": e.cfg.Model, "usage": x.usage(),
		"system_fingerprint": nil, "kv_transfer_params": kvp}
	if g.chat {
		choice["message"] = map[string]any{"role": "assistant", "content": x.text.String(), "tool_calls": []any{}, "reasoning_content": nil}
		body["object"], body["prompt_logprobs"] = "chat.completion", nil
	} else {
		choice["text"], choice["prompt_logprobs"] = x.text.String(), nil
		body["object"] = "text_completion"
	}
	body["choices"] = []any{choice}
	writeJSON(x.w, 200, body)
}

// fail reports an engine-side error the way vLLM does: an error event
// after a committed 200 on a stream, an HTTP 500 otherwise.
func (x *genRun) fail(msg string) {
	x.record("error")
	if x.g.stream {
		x.event(`{"error":{"message":` + strconv.Quote(msg) + `,"type":"InternalServerError","param":null,"code":500}}`)
		x.event("[DONE]")
		return
	}
	apiError(x.w, 500, "InternalServerError", msg)
}

// record counts a finished request.
func (x *genRun) record(reason string) {
	e := x.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.met.add("vllm:prompt_tokens_total", "", float64(len(x.g.prompt)))
	e.met.add("vllm:request_success_total", `finished_reason="`+reason+`"`, 1)
	e.met.observe("vllm:e2e_request_latency_seconds", e.since(x.arrived))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
