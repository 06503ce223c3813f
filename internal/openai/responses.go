package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The Responses API as vLLM serves it: ResponsesRequest and
// ResponsesResponse in vllm/entrypoints/openai/responses/protocol.py
// (https://github.com/vllm-project/vllm/blob/c0bc59655a4068c08621bcac8ab67b39cd2ec173/vllm/entrypoints/openai/responses/protocol.py).
// The router serves it in two legs like chat: FromResponses translates
// the request into a chat completion body, and ResponseBody / the
// ResponseStream build the Response object and its events from the chat
// decode stream.

// Responses is what the router keeps from a valid Responses request: the
// fields a Response object echoes.
type Responses struct {
	Stream          bool
	Instructions    *string
	MaxOutputTokens *int
	Temperature     *float64
	TopP            *float64
	Metadata        json.RawMessage // an object, or nil
	User            *string
}

// responsesKnown are the request fields the translation reads; each
// other field is refused by name unless it holds its no-op value
// (responsesNoop).
var responsesKnown = map[string]bool{
	"model": true, "input": true, "instructions": true, "max_output_tokens": true, "temperature": true,
	"top_p": true, "stream": true, "store": true, "metadata": true, "user": true,
}

// responsesNoop are fields whose value asks for nothing the chat path
// does not already do: vLLM's defaults (ResponsesRequest, protocol.py
// above). Any other value is refused by name.
var responsesNoop = map[string][]string{
	"background":           {"false"},
	"previous_response_id": {},
	"tools":                {"[]"},
	"tool_choice":          {`"auto"`, `"none"`},
	"parallel_tool_calls":  {"true", "false"},
	"truncation":           {`"disabled"`},
	"service_tier":         {`"auto"`, `"default"`},
	"include":              {"[]"},
	"text":                 {`{"format":{"type":"text"}}`},
}

// responsesWhy says how to do without a refused field.
var responsesWhy = map[string]string{
	"previous_response_id": "this router stores no responses; send the whole conversation in input",
	"store":                "this router stores no responses (no GET /v1/responses/{id}); omit store or send false",
	"background":           "background responses need a response store, which this router has none of",
	"tools":                "tools are not served on /v1/responses by this router; use /v1/chat/completions",
	"tool_choice":          "tools are not served on /v1/responses by this router; use /v1/chat/completions",
}

// FromResponses checks a Responses API body and translates it into the
// chat completion body the two legs run: instructions become a system
// message ahead of input's messages, max_output_tokens becomes
// max_tokens. A field the translation cannot honour is refused with a 400
// naming it.
func FromResponses(b map[string]json.RawMessage) (map[string]json.RawMessage, Responses, *Error) {
	var q Responses
	if e := responsesFieldsServed(b); e != nil {
		return nil, q, e
	}
	present := func(k string) (json.RawMessage, bool) {
		v, ok := b[k]
		return v, ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
	}
	if e := q.read(present); e != nil {
		return nil, q, e
	}
	msgs, e := responsesMessages(present, q.Instructions)
	if e != nil {
		return nil, q, e
	}
	// The chat body always streams with usage: the decode leg streams
	// anyway, and the engine's usage chunk gives the Response its exact
	// token counts. Responses.Stream says what the client hears.
	chat := map[string]json.RawMessage{"messages": mustJSON(msgs), "stream": json.RawMessage("true"),
		"stream_options": json.RawMessage(`{"include_usage":true}`)}
	for _, k := range []string{"model", "temperature", "top_p", "user"} {
		if v, ok := present(k); ok {
			chat[k] = v
		}
	}
	if q.MaxOutputTokens != nil {
		chat["max_tokens"] = mustJSON(*q.MaxOutputTokens)
	}
	return chat, q, nil
}

// store: vLLM's ResponsesRequest defaults it to true, but OpenAI's SDKs
// send it only when the caller sets it (openai-go v3.102.0,
// responses/response.go: `Store param.Opt[bool] json:"store,omitzero"`),
// so an absent store is the SDK default and is accepted; store: true
// asks for a stored response no later call here could retrieve.
// responsesFieldsServed refuses, by name, every field the translation
// does not read and that holds something other than a no-op value.
func responsesFieldsServed(b map[string]json.RawMessage) *Error {
	if v, ok := b["store"]; ok && bytes.Equal(compact(v), []byte("true")) {
		return Unsupported("store", "store: true is not supported: "+responsesWhy["store"])
	}
	for _, k := range slices.Sorted(maps.Keys(b)) { // the same field named first every time
		if responsesKnown[k] {
			continue
		}
		c := compact(b[k])
		if bytes.Equal(c, []byte("null")) {
			continue
		}
		noop := false
		for _, ok := range responsesNoop[k] {
			noop = noop || string(c) == ok
		}
		if noop {
			continue
		}
		why := responsesWhy[k]
		if why == "" {
			why = "this router serves text input and output only on /v1/responses; remove the field"
		}
		return Unsupported(k, k+" is not supported: "+why)
	}
	return nil
}

func compact(v json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

// read checks and keeps the scalar fields a Response echoes.
func (q *Responses) read(present lookup) *Error {
	if v, ok := present("stream"); ok && json.Unmarshal(v, &q.Stream) != nil {
		return InvalidType("stream", "stream must be a boolean")
	}
	if v, ok := present("store"); ok {
		var s bool
		if json.Unmarshal(v, &s) != nil {
			return InvalidType("store", "store must be a boolean")
		}
	}
	for k, dst := range map[string]**string{"instructions": &q.Instructions, "user": &q.User} {
		if v, ok := present(k); ok {
			if json.Unmarshal(v, dst) != nil {
				return InvalidType(k, k+" must be a string")
			}
		}
	}
	for k, dst := range map[string]**float64{"temperature": &q.Temperature, "top_p": &q.TopP} {
		if v, ok := present(k); ok {
			if json.Unmarshal(v, dst) != nil {
				return InvalidType(k, k+" must be a number")
			}
		}
	}
	if v, ok := present("max_output_tokens"); ok {
		n, isInt := intValue(v)
		switch {
		case !isInt:
			return InvalidType("max_output_tokens", "max_output_tokens must be an integer")
		case n < 1:
			return InvalidValue("max_output_tokens", fmt.Sprintf("max_output_tokens must be at least 1, got %d", n))
		}
		q.MaxOutputTokens = &n
	}
	if v, ok := present("metadata"); ok {
		var m map[string]string
		if json.Unmarshal(v, &m) != nil {
			return InvalidType("metadata", "metadata must be an object of string values")
		}
		q.Metadata = v
	}
	return nil
}

// chatMessage is one message of the translated chat body.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// inputItem is one item of a message-list input: an EasyInputMessage
// ({role, content}) or a message item ({type: "message", role, content}).
type inputItem struct {
	Type    *string         `json:"type"`
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

// inputRoles maps a Responses role to its chat role. developer is
// OpenAI's newer name for system instructions; chat templates know
// system.
var inputRoles = map[string]string{"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

// responsesMessages is input (a string, or a list of message items) as
// chat messages, after instructions as a system message.
func responsesMessages(present lookup, instructions *string) ([]chatMessage, *Error) {
	var msgs []chatMessage
	if instructions != nil && *instructions != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: *instructions})
	}
	v, ok := present("input")
	if !ok {
		return nil, InvalidType("input", "input is required: a string or an array of messages")
	}
	var text string
	if json.Unmarshal(v, &text) == nil {
		if text == "" {
			return nil, InvalidValue("input", "input must not be empty")
		}
		return append(msgs, chatMessage{Role: "user", Content: text}), nil
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return nil, InvalidType("input", "input must be a string or an array of messages")
	}
	if len(items) == 0 {
		return nil, InvalidValue("input", "input must not be empty")
	}
	for i, raw := range items {
		m, e := inputMessage(i, raw)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// inputMessage translates input[i].
func inputMessage(i int, raw json.RawMessage) (chatMessage, *Error) {
	param := fmt.Sprintf("input[%d]", i)
	var it inputItem
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &it) != nil {
		return chatMessage{}, InvalidType(param, param+" must be a message object with role and content")
	}
	if it.Type != nil && *it.Type != "message" {
		return chatMessage{}, Unsupported(param+".type", fmt.Sprintf("%s.type is %q: this router serves message items only on /v1/responses; send the conversation as messages", param, *it.Type))
	}
	if it.Role == nil || inputRoles[*it.Role] == "" {
		return chatMessage{}, InvalidValue(param+".role", param+".role must be user, assistant, system or developer")
	}
	text, e := inputText(param+".content", it.Content)
	if e != nil {
		return chatMessage{}, e
	}
	return chatMessage{Role: inputRoles[*it.Role], Content: text}, nil
}

// textPartTypes are the content parts that carry text: a user's
// input_text, and output_text in a prior assistant turn.
var textPartTypes = map[string]bool{"input_text": true, "output_text": true}

// inputText is a message's content, a string or a list of text parts,
// as one string (parts concatenated, as a chat template joins them).
func inputText(param string, raw json.RawMessage) (string, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type *string `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", InvalidType(param, param+" must be a string or an array of input_text parts")
	}
	var b bytes.Buffer
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch {
		case p.Type == nil:
			return "", InvalidType(pp+".type", pp+".type is required (input_text)")
		case !textPartTypes[*p.Type]:
			return "", Unsupported(pp+".type", fmt.Sprintf("%s.type is %q: this router serves text only (no image, audio or file input); send input_text parts", pp, *p.Type))
		case p.Text == nil:
			return "", InvalidType(pp+".text", pp+".text must be a string")
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the router's own types reach here
	}
	return b
}

// ResponseMeta is what a Response object says besides its output: the
// router's ids and the request's echoed fields.
type ResponseMeta struct {
	ID        string // resp_<request id>
	ItemID    string // msg_<request id>: the one output message
	CreatedAt int64  // Unix seconds
	Model     string
	Req       Responses
}

// responseObject is vLLM's ResponsesResponse (protocol.py above) for a
// text-only response: every key always present, as vLLM dumps it.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *struct{}          `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Metadata           json.RawMessage    `json:"metadata"`
	Model              string             `json:"model"`
	Output             []outputMessage    `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          *struct{}          `json:"reasoning"`
	ServiceTier        string             `json:"service_tier"`
	Temperature        float64            `json:"temperature"`
	Text               responseText       `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
	Tools              []struct{}         `json:"tools"`
	TopLogprobs        *int               `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsage     `json:"usage"`
	User               *string            `json:"user"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseText struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

// outputMessage is a ResponseOutputMessage: one assistant message.
type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []outputText `json:"content"`
}

// outputText is a ResponseOutputText content part.
type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

// responseUsage is vLLM's ResponseUsage.
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// vLLM's sampling defaults when the request sets none
// (ResponsesRequest._DEFAULT_SAMPLING_PARAMS); the Response echoes them.
const defaultTemperature, defaultTopP = 1.0, 1.0

// object is the Response with status and output; usage nil until done.
func (m ResponseMeta) object(status string, output []outputMessage, usage *responseUsage) responseObject {
	o := responseObject{ID: m.ID, Object: "response", CreatedAt: m.CreatedAt, Status: status,
		Instructions: m.Req.Instructions, MaxOutputTokens: m.Req.MaxOutputTokens, Metadata: m.Req.Metadata,
		Model: m.Model, Output: output, ParallelToolCalls: true, ServiceTier: "auto",
		Temperature: defaultTemperature, TopP: defaultTopP, ToolChoice: "auto", Tools: []struct{}{},
		Truncation: "disabled", Usage: usage, User: m.Req.User}
	if o.Output == nil {
		o.Output = []outputMessage{}
	}
	o.Text.Format.Type = "text"
	if m.Req.Temperature != nil {
		o.Temperature = *m.Req.Temperature
	}
	if m.Req.TopP != nil {
		o.TopP = *m.Req.TopP
	}
	if status == "incomplete" {
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	return o
}

// message is the output message holding text.
func (m ResponseMeta) message(status, text string) outputMessage {
	return outputMessage{ID: m.ItemID, Type: "message", Role: "assistant", Status: status,
		Content: []outputText{textPart(text)}}
}

func textPart(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

func usageOf(input, output int) *responseUsage {
	u := &responseUsage{InputTokens: input, OutputTokens: output, TotalTokens: input + output}
	return u
}

// statusOf is the Response status a chat finish_reason means: a length
// stop is incomplete (reason max_output_tokens, as vLLM's from_request
// reports it), anything else completed.
func statusOf(finishReason string) string {
	if finishReason == "length" {
		return "incomplete"
	}
	return "completed"
}

// ResponseFold folds the chat decode stream of a Responses request: its
// text, finish reason and the engine's usage, and the stream's sequence
// numbers. The router streams its events (Append*) or, for a client that
// asked for no stream, answers with Body.
type ResponseFold struct {
	Meta   ResponseMeta
	limit  int // most stream bytes kept (serving.max_response_bytes)
	kept   int
	seq    int // the next event's sequence_number
	text   strings.Builder
	finish string
	usage  *responseUsage // the engine's, from the include_usage chunk
}

// NewResponseFold folds a stream of at most limit bytes.
func NewResponseFold(m ResponseMeta, limit int) *ResponseFold {
	return &ResponseFold{Meta: m, limit: limit}
}

// responseChunk is the part of a chat stream chunk the fold reads.
type responseChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Chunk folds one chat stream event and returns its text.
func (f *ResponseFold) Chunk(ev vllm.Event) (string, error) {
	f.kept += len(ev.Data)
	if f.kept > f.limit {
		return "", &fault.Error{Phase: fault.Decode, Reason: fault.ResponseLimit, Class: fault.ClassStream, Msg: "response exceeds serving.max_response_bytes"}
	}
	var ch responseChunk
	if ev.NotJSON || json.Unmarshal(ev.Data, &ch) != nil {
		return "", &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream, Msg: "a stream event is not a chat chunk"}
	}
	if ch.Model != "" {
		f.Meta.Model = ch.Model
	}
	if u := ch.Usage; u != nil {
		f.usage = usageOf(u.PromptTokens, u.CompletionTokens)
	}
	var delta string
	for _, c := range ch.Choices {
		if c.Delta != nil && c.Delta.Content != nil {
			delta += *c.Delta.Content
		}
		if c.FinishReason != nil {
			f.finish = *c.FinishReason
		}
	}
	f.text.WriteString(delta)
	return delta, nil
}

// usageOr is the engine's usage, else the router's counts.
func (f *ResponseFold) usageOr(input, output int) *responseUsage {
	if f.usage != nil {
		return f.usage
	}
	return usageOf(input, output)
}

// final is the finished Response; input and output are the router's
// token counts, used when the engine reported no usage.
func (f *ResponseFold) final(input, output int) responseObject {
	status := statusOf(f.finish)
	return f.Meta.object(status, []outputMessage{f.Meta.message(status, f.text.String())}, f.usageOr(input, output))
}

// Body is the non-streamed Response.
func (f *ResponseFold) Body(input, output int) []byte { return mustJSON(f.final(input, output)) }

// streamEvent is one Responses stream event: the fields of the event
// types vLLM's simple (non-Harmony) stream emits for text
// (vllm/entrypoints/openai/responses/simple_streaming_events.py,
// https://github.com/vllm-project/vllm/blob/90d7b6b8af44c93549f45ca37d49bf9a8d87e970/vllm/entrypoints/openai/responses/simple_streaming_events.py).
type streamEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           *outputMessage  `json:"item,omitempty"`
	Part           *outputText     `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Logprobs       *[]struct{}     `json:"logprobs,omitempty"`
}

var zero = 0

// appendEvent frames ev as vLLM's api_router does: "event: <type>" then
// "data: <json>" (_convert_stream_to_sse_events in
// https://github.com/vllm-project/vllm/blob/f6e93254b87059a005c9043f4c72322994aff95a/vllm/entrypoints/openai/responses/api_router.py);
// no [DONE] follows the last one.
func (f *ResponseFold) appendEvent(dst []byte, ev streamEvent) []byte {
	ev.SequenceNumber = f.seq
	f.seq++
	dst = append(dst, "event: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, mustJSON(ev)...)
	return append(dst, "\n\n"...)
}

// AppendStart appends the events before the first text: response.created,
// response.in_progress, response.output_item.added and
// response.content_part.added.
func (f *ResponseFold) AppendStart(dst []byte) []byte {
	initial := f.Meta.object("in_progress", nil, nil)
	dst = f.appendEvent(dst, streamEvent{Type: "response.created", Response: &initial})
	dst = f.appendEvent(dst, streamEvent{Type: "response.in_progress", Response: &initial})
	item := f.Meta.message("in_progress", "")
	item.Content = []outputText{}
	dst = f.appendEvent(dst, streamEvent{Type: "response.output_item.added", OutputIndex: &zero, Item: &item})
	part := textPart("")
	return f.appendEvent(dst, streamEvent{Type: "response.content_part.added", OutputIndex: &zero, ItemID: f.Meta.ItemID,
		ContentIndex: &zero, Part: &part})
}

// AppendDelta appends one response.output_text.delta.
func (f *ResponseFold) AppendDelta(dst []byte, delta string) []byte {
	none := []struct{}{}
	return f.appendEvent(dst, streamEvent{Type: "response.output_text.delta", OutputIndex: &zero, ItemID: f.Meta.ItemID,
		ContentIndex: &zero, Delta: &delta, Logprobs: &none})
}

// AppendEnd appends the closing events: response.output_text.done,
// response.content_part.done, response.output_item.done and
// response.completed with the whole Response and its usage.
func (f *ResponseFold) AppendEnd(dst []byte, input, output int) []byte {
	text, none := f.text.String(), []struct{}{}
	dst = f.appendEvent(dst, streamEvent{Type: "response.output_text.done", OutputIndex: &zero, ItemID: f.Meta.ItemID,
		ContentIndex: &zero, Text: &text, Logprobs: &none})
	part := textPart(text)
	dst = f.appendEvent(dst, streamEvent{Type: "response.content_part.done", OutputIndex: &zero, ItemID: f.Meta.ItemID,
		ContentIndex: &zero, Part: &part})
	done := f.final(input, output)
	dst = f.appendEvent(dst, streamEvent{Type: "response.output_item.done", OutputIndex: &zero, Item: &done.Output[0]})
	return f.appendEvent(dst, streamEvent{Type: "response.completed", Response: &done})
}
