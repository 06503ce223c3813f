package openai

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Assembler folds a decode stream into one OpenAI response for a client
// that did not ask for a stream.
type Assembler struct {
	chat     bool
	limit    int                 // most stream bytes kept (serving.max_response_bytes)
	rename   func([]byte) []byte // applied to each event before it is read
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
	lp       logprobs
}

// NewAssembler folds a chat (chat true) or completions stream of at most
// limit bytes. rename rewrites each event before it is read (the router
// puts its request id where the engine wrote the leg's); nil keeps events
// as they are.
func NewAssembler(chat bool, limit int, rename func([]byte) []byte) *Assembler {
	if rename == nil {
		rename = func(b []byte) []byte { return b }
	}
	return &Assembler{chat: chat, limit: limit, rename: rename}
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
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
}

// Event folds one stream event.
func (a *Assembler) Event(ev vllm.Event) error {
	if ev.NotJSON {
		return &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream, Msg: "a stream event is not JSON"}
	}
	a.kept += len(ev.Data)
	if a.kept > a.limit {
		return &fault.Error{Phase: fault.Decode, Reason: fault.ResponseLimit, Class: fault.ClassStream,
			Msg: "response exceeds serving.max_response_bytes"}
	}
	var ch chunk
	if err := json.Unmarshal(a.rename(ev.Data), &ch); err != nil {
		return &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream, Msg: "malformed stream event: " + err.Error()}
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
		if isSet(c.Logprobs) {
			if err := a.lp.add(a.chat, c.Logprobs); err != nil {
				return &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream, Msg: "malformed logprobs: " + err.Error()}
			}
		}
	}
	return nil
}

// meta keeps response metadata from the last chunk that reports it.
func (a *Assembler) meta(ch chunk) {
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

func (a *Assembler) delta(d *chatDelta) {
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

// The assembled response. Fields are declared in key order: the bytes are
// what they were when the response was built as maps (encoding/json sorts
// map keys).
type response struct {
	Choices []choice        `json:"choices"`
	Created json.RawMessage `json:"created"` // null when no chunk said
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Object  string          `json:"object"`
	Usage   json.RawMessage `json:"usage"` // the engine's, else usageCounts
}

// usageCounts is the usage the router counted itself, for a stream that
// reported none.
type usageCounts struct {
	CompletionTokens int `json:"completion_tokens"`
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type choice struct {
	FinishReason json.RawMessage `json:"finish_reason"` // null until a chunk sets it
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"`              // null unless the stream carried logprobs
	Message      *message        `json:"message,omitempty"`     // chat
	StopReason   json.RawMessage `json:"stop_reason,omitempty"` // when the engine said
	Text         *string         `json:"text,omitempty"`        // completions
}

type functionCall struct {
	Arguments string `json:"arguments"`
	Name      string `json:"name"`
}

type toolCallOut struct {
	Function functionCall `json:"function"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
}

type message struct {
	Content          *string       `json:"content"` // null when the output was only reasoning or tool calls
	FunctionCall     *functionCall `json:"function_call,omitempty"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	Refusal          *string       `json:"refusal,omitempty"`
	Role             string        `json:"role"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

// Body is the assembled response. promptTokens and completionTokens are
// the router's own counts, sent as usage when the stream reported none.
func (a *Assembler) Body(promptTokens, completionTokens int) ([]byte, error) {
	ch := choice{Index: 0, FinishReason: rawOrNull(a.finishR), Logprobs: a.lp.body(a.chat)}
	if isSet(a.stop) {
		ch.StopReason = a.stop
	}
	resp := response{ID: a.id, Model: a.model, Created: rawOrNull(a.created), Usage: a.usage}
	if a.chat {
		msg, err := a.message()
		if err != nil {
			return nil, err
		}
		ch.Message, resp.Object = msg, "chat.completion"
	} else {
		text := a.text.String()
		ch.Text, resp.Object = &text, "text_completion"
	}
	resp.Choices = []choice{ch}
	if !isSet(a.usage) {
		resp.Usage, _ = json.Marshal(usageCounts{PromptTokens: promptTokens, CompletionTokens: completionTokens,
			TotalTokens: promptTokens + completionTokens})
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return nil, &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream, Msg: "assemble response: " + err.Error()}
	}
	return body, nil
}

// message is the assembled chat message; content is null when the output
// was only reasoning or tool calls.
func (a *Assembler) message() (*message, error) {
	msg := &message{Role: "assistant"}
	if a.sawChat.content || (!a.sawChat.reason && !a.sawTools && !a.sawFn) {
		msg.Content = strp(a.content.String())
	}
	if a.sawChat.reason {
		msg.ReasoningContent = strp(a.reason.String())
	}
	if a.sawChat.refusal {
		msg.Refusal = strp(a.refusal.String())
	}
	if a.sawTools {
		calls, err := a.toolCalls()
		if err != nil {
			return nil, err
		}
		msg.ToolCalls = calls
	}
	if a.sawFn {
		msg.FunctionCall = &functionCall{Name: a.fnName.String(), Arguments: a.fnArgs.String()}
	}
	return msg, nil
}

// toolCalls are the streamed tool calls in index order.
func (a *Assembler) toolCalls() ([]toolCallOut, error) {
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	calls := make([]toolCallOut, 0, len(idx))
	for _, i := range idx {
		tc := a.calls[i]
		if tc.id == "" || tc.name == "" {
			return nil, &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream,
				Msg: "a streamed tool call ended without an id or a function name"}
		}
		typ := tc.typ
		if typ == "" {
			typ = "function"
		}
		calls = append(calls, toolCallOut{ID: tc.id, Type: typ, Function: functionCall{Name: tc.name, Arguments: tc.args.String()}})
	}
	return calls, nil
}

// rawOrNull is raw when it holds a value, else nil (which encodes as null).
func rawOrNull(raw json.RawMessage) json.RawMessage {
	if isSet(raw) {
		return raw
	}
	return nil
}
