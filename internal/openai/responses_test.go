package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func respBody(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var b map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatalf("test body %s: %v", s, err)
	}
	return b
}

// A Responses request becomes the chat body the two legs run.
func TestFromResponsesTranslates(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string // chat fields, compacted JSON
	}{
		{"text input", `{"model":"m","input":"hi"}`, map[string]string{
			"model": `"m"`, "messages": `[{"role":"user","content":"hi"}]`}},
		{"instructions first, parts joined, developer as system", `{"instructions":"be brief","input":[
			{"role":"developer","content":"rules"},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
			{"role":"assistant","content":[{"type":"output_text","text":"c"}]}]}`, map[string]string{
			"messages": `[{"role":"system","content":"be brief"},{"role":"system","content":"rules"},{"role":"user","content":"ab"},{"role":"assistant","content":"c"}]`}},
		{"sampling and length", `{"input":"x","max_output_tokens":7,"temperature":0.5,"top_p":0.9,"user":"u"}`, map[string]string{
			"max_tokens": `7`, "temperature": `0.5`, "top_p": `0.9`, "user": `"u"`}},
		{"no-op values accepted", `{"input":"x","store":false,"background":false,"tools":[],"tool_choice":"auto","truncation":"disabled",
			"previous_response_id":null,"text":{"format":{"type":"text"}},"metadata":{"k":"v"}}`, map[string]string{
			"messages": `[{"role":"user","content":"x"}]`}},
		{"stream false still streams the legs", `{"input":"x","stream":false}`, map[string]string{
			"stream": `true`, "stream_options": `{"include_usage":true}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, _, e := FromResponses(respBody(t, tc.in))
			if e != nil {
				t.Fatalf("refused: %s (param %v)", e.Message, e.Param)
			}
			for k, want := range tc.want {
				if got := string(compact(chat[k])); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			for _, k := range []string{"input", "instructions", "max_output_tokens", "store", "metadata"} {
				if _, ok := chat[k]; ok {
					t.Errorf("chat body keeps Responses field %s", k)
				}
			}
		})
	}
}

// What the translation cannot honour is refused 400, naming the field.
func TestFromResponsesRefusesByName(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"input":"x","store":true}`, "store"},
		{`{"input":"x","background":true}`, "background"},
		{`{"input":"x","tools":[{"type":"function","name":"f"}]}`, "tools"},
		{`{"input":"x","tool_choice":"required"}`, "tool_choice"},
		{`{"input":"x","reasoning":{"effort":"low"}}`, "reasoning"},
		{`{"input":"x","include":["message.output_text.logprobs"]}`, "include"},
		{`{"input":"x","prompt":{"id":"p"}}`, "prompt"},
		{`{"input":"x","zzz":1,"conversation":"c"}`, "conversation"}, // the first unknown field in name order
		{`{}`, "input"},
		{`{"input":""}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":7}`, "input"},
		{`{"input":["hi"]}`, "input[0]"},
		{`{"input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{`{"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input[0].type"},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type"},
		{`{"input":[{"role":"user","content":[{"text":"x"}]}]}`, "input[0].content[0].type"},
		{`{"input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text"},
		{`{"input":[{"role":"user","content":5}]}`, "input[0].content"},
		{`{"input":"x","max_output_tokens":0}`, "max_output_tokens"},
		{`{"input":"x","max_output_tokens":2.5}`, "max_output_tokens"},
		{`{"input":"x","temperature":"hot"}`, "temperature"},
		{`{"input":"x","stream":"yes"}`, "stream"},
		{`{"input":"x","instructions":3}`, "instructions"},
		{`{"input":"x","metadata":[1]}`, "metadata"},
	} {
		t.Run(tc.param+" "+tc.in, func(t *testing.T) {
			_, _, e := FromResponses(respBody(t, tc.in))
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != 400 || e.Type != TypeInvalid || e.Param == nil || *e.Param != tc.param || !strings.Contains(e.Message, tc.param) {
				t.Errorf("%d %s param %v: %s; want 400 naming %s", e.Status, e.Type, e.Param, e.Message, tc.param)
			}
		})
	}
}

func fold(t *testing.T, chunks ...string) *ResponseFold {
	t.Helper()
	f := NewResponseFold(ResponseMeta{ID: "resp_r", ItemID: "msg_r", CreatedAt: 5, Model: "m"}, 1<<20)
	for _, c := range chunks {
		if _, e := f.Chunk(vllm.Event{Data: []byte(c)}); e != nil {
			t.Fatalf("chunk %s: %v", c, e)
		}
	}
	return f
}

// The Response object reports the engine's usage when the stream had it,
// else the router's counts; a length stop is incomplete.
func TestResponseFoldBody(t *testing.T) {
	for _, tc := range []struct {
		name         string
		chunks       []string
		status, text string
		in, out      int
		reason       *string
	}{
		{"engine usage, stop", []string{`{"model":"m2","choices":[{"delta":{"role":"assistant"}}]}`,
			`{"choices":[{"delta":{"content":"he"}}]}`, `{"choices":[{"delta":{"content":"llo"},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`}, "completed", "hello", 11, 2, nil},
		{"router counts, length", []string{`{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}`},
			"incomplete", "x", 3, 4, strp("max_output_tokens")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r responseObject
			if err := json.Unmarshal(fold(t, tc.chunks...).Body(3, 4), &r); err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(r.Output) == 1 && len(r.Output[0].Content) == 1 {
				got = r.Output[0].Content[0].Text
			}
			if r.Status != tc.status || got != tc.text || r.Usage.InputTokens != tc.in || r.Usage.OutputTokens != tc.out ||
				r.Usage.TotalTokens != tc.in+tc.out || r.Object != "response" || r.ID != "resp_r" || r.Output[0].ID != "msg_r" {
				t.Errorf("%+v", r)
			}
			if (tc.reason == nil) != (r.IncompleteDetails == nil) || (tc.reason != nil && r.IncompleteDetails.Reason != *tc.reason) {
				t.Errorf("incomplete_details %+v, want %v", r.IncompleteDetails, tc.reason)
			}
		})
	}
}

// A fold refuses what is not a chat chunk, and more than its byte limit.
func TestResponseFoldRefusesBadStreams(t *testing.T) {
	f := NewResponseFold(ResponseMeta{}, 10)
	if _, e := f.Chunk(vllm.Event{Data: []byte("nope"), NotJSON: true}); e == nil || fault.As(e).Reason != fault.InvalidResponse {
		t.Errorf("not JSON: %v", e)
	}
	if _, e := f.Chunk(vllm.Event{Data: []byte(`{"choices":[{"delta":{"content":"0123456789"}}]}`)}); e == nil || fault.As(e).Reason != fault.ResponseLimit {
		t.Errorf("over the limit: %v", e)
	}
}

// The translation's cost per request, and the fold's per streamed token
// event (its JSON decode plus one delta event's encoding): what the
// Responses path adds to a chat call.
func BenchmarkFromResponses(b *testing.B) {
	raw := []byte(`{"model":"m","instructions":"be brief","max_output_tokens":64,"input":[{"role":"user","content":[{"type":"input_text","text":"tell me about narwhals"}]},{"role":"assistant","content":"they have tusks"},{"role":"user","content":"more"}]}`)
	for b.Loop() {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		if _, _, e := FromResponses(m); e != nil {
			b.Fatal(e.Message)
		}
	}
}

func BenchmarkResponseFoldEvent(b *testing.B) {
	f := NewResponseFold(ResponseMeta{ID: "resp_r", ItemID: "msg_r", Model: "m"}, 1<<62)
	ev := vllm.Event{Data: []byte(`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null,"token_ids":[1234]}]}`), Tokens: 1}
	var dst []byte
	for b.Loop() {
		d, _ := f.Chunk(ev)
		dst = f.AppendDelta(dst[:0], d)
	}
}
