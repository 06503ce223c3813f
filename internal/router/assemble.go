package router

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

// assembler folds a decode stream into one OpenAI response for a client
// that did not ask for a stream.
type assembler struct {
	c        *call
	kept     int
	id       string
	created  json.RawMessage
	model    string
	finishR  json.RawMessage
	stop     json.RawMessage
	usage    json.RawMessage
	text     strings.Builder
	content  strings.Builder
	reason   strings.Builder // reasoning_content / reasoning
	refusal  strings.Builder
	sawChat  struct{ content, reason, refusal bool }
	calls    map[int]*toolCall
	fnName   strings.Builder // legacy function_call
	fnArgs   strings.Builder
	sawFn    bool
	sawTools bool
}

// chatDelta is the part of a chat stream delta the assembler folds.
type chatDelta struct {
	Content          *string `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
	Refusal          *string `json:"refusal"`
	ToolCalls        []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function_call"`
}

type toolCall struct {
	id, typ, name string
	args          strings.Builder
}

type chunk struct {
	ID      string          `json:"id"`
	Created json.RawMessage `json:"created"`
	Model   string          `json:"model"`
	Usage   json.RawMessage `json:"usage"`
	Choices []struct {
		Text         *string         `json:"text"`
		FinishReason json.RawMessage `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
		Delta        *chatDelta      `json:"delta"`
	} `json:"choices"`
}

func (a *assembler) event(ev vllm.Event) *vllm.Error {
	if ev.NotJSON {
		return &vllm.Error{Phase: "decode", Reason: vllm.ReasonInvalidResponse, Class: "stream", Msg: "a stream event is not JSON"}
	}
	a.kept += len(ev.Data)
	if a.kept > a.c.r.cfg.Serving.MaxResponseBytes {
		return &vllm.Error{Phase: "decode", Reason: vllm.ReasonResponseLimit, Class: "stream",
			Msg: "response exceeds serving.max_response_bytes"}
	}
	var ch chunk
	if err := json.Unmarshal(a.c.ownID(ev.Data), &ch); err != nil {
		return &vllm.Error{Phase: "decode", Reason: vllm.ReasonInvalidResponse, Class: "stream", Msg: "malformed stream event: " + err.Error()}
	}
	a.meta(ch)
	for _, c := range ch.Choices {
		if c.Text != nil {
			a.text.WriteString(*c.Text)
		}
		if isSet(c.FinishReason) {
			a.finishR, a.stop = c.FinishReason, c.StopReason
		}
		if c.Delta != nil {
			a.delta(c.Delta)
		}
	}
	return nil
}

// meta keeps response metadata from the last chunk that reports it.
func (a *assembler) meta(ch chunk) {
	if ch.ID != "" {
		a.id = ch.ID
	}
	if isSet(ch.Created) {
		a.created = ch.Created
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
	if isSet(ch.Usage) {
		a.usage = ch.Usage
	}
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func (a *assembler) delta(d *chatDelta) {
	if d.Content != nil && *d.Content != "" {
		a.content.WriteString(*d.Content)
		a.sawChat.content = true
	}
	for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
		if r != nil && *r != "" {
			a.reason.WriteString(*r)
			a.sawChat.reason = true
		}
	}
	if d.Refusal != nil && *d.Refusal != "" {
		a.refusal.WriteString(*d.Refusal)
		a.sawChat.refusal = true
	}
	for _, tc := range d.ToolCalls {
		if a.calls == nil {
			a.calls = map[int]*toolCall{}
		}
		call := a.calls[tc.Index]
		if call == nil {
			call = &toolCall{}
			a.calls[tc.Index] = call
		}
		call.id += tc.ID
		if tc.Type != "" {
			call.typ = tc.Type
		}
		call.name += tc.Function.Name
		call.args.WriteString(tc.Function.Arguments)
		a.sawTools = true
	}
	if d.FunctionCall != nil {
		a.fnName.WriteString(d.FunctionCall.Name)
		a.fnArgs.WriteString(d.FunctionCall.Arguments)
		a.sawFn = true
	}
}

func (a *assembler) finish() *vllm.Error {
	c := a.c
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": rawOrNull(a.finishR)}
	if isSet(a.stop) {
		choice["stop_reason"] = a.stop
	}
	resp := map[string]any{"id": a.id, "model": a.model, "created": rawOrNull(a.created)}
	if c.chat {
		msg, err := a.message()
		if err != nil {
			return err
		}
		choice["message"] = msg
		resp["object"] = "chat.completion"
	} else {
		choice["text"] = a.text.String()
		resp["object"] = "text_completion"
	}
	resp["choices"] = []any{choice}
	if isSet(a.usage) {
		resp["usage"] = a.usage
	} else {
		resp["usage"] = map[string]int{"prompt_tokens": c.inputLen, "completion_tokens": c.tokens,
			"total_tokens": c.inputLen + c.tokens}
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return &vllm.Error{Phase: "decode", Reason: vllm.ReasonInvalidResponse, Class: "stream", Msg: "assemble response: " + err.Error()}
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	c.committed = true
	if _, err := c.w.Write(body); err != nil {
		c.clientGone = true
	}
	return nil
}

// message is the assembled chat message; content is null when the output
// was only reasoning or tool calls.
func (a *assembler) message() (map[string]any, *vllm.Error) {
	msg := map[string]any{"role": "assistant", "content": nil}
	if a.sawChat.content || (!a.sawChat.reason && !a.sawTools && !a.sawFn) {
		msg["content"] = a.content.String()
	}
	if a.sawChat.reason {
		msg["reasoning_content"] = a.reason.String()
	}
	if a.sawChat.refusal {
		msg["refusal"] = a.refusal.String()
	}
	if a.sawTools {
		idx := make([]int, 0, len(a.calls))
		for i := range a.calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		calls := make([]any, 0, len(idx))
		for _, i := range idx {
			tc := a.calls[i]
			if tc.id == "" || tc.name == "" {
				return nil, &vllm.Error{Phase: "decode", Reason: vllm.ReasonInvalidResponse, Class: "stream",
					Msg: "a streamed tool call ended without an id or a function name"}
			}
			typ := tc.typ
			if typ == "" {
				typ = "function"
			}
			calls = append(calls, map[string]any{"id": tc.id, "type": typ,
				"function": map[string]any{"name": tc.name, "arguments": tc.args.String()}})
		}
		msg["tool_calls"] = calls
	}
	if a.sawFn {
		msg["function_call"] = map[string]any{"name": a.fnName.String(), "arguments": a.fnArgs.String()}
	}
	return msg, nil
}

func rawOrNull(raw json.RawMessage) any {
	if isSet(raw) {
		return raw
	}
	return nil
}
