package openai

import (
	"bytes"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The assembled body is byte for byte what the router sent when it built
// the response as maps: key order, null fields, raw engine values
// (compacted), HTML escaping, and the router's own usage when the stream
// reported none (7 prompt and 4 completion tokens here).
func TestAssemblerBody(t *testing.T) {
	rename := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("RID-a1-decode"), []byte("RID")) }
	for _, tc := range []struct {
		name   string
		chat   bool
		events []string
		want   string
	}{
		{"completion text, fallback usage", false, []string{
			`{"id":"cmpl-RID-a1-decode","created":1700000000,"model":"m","choices":[{"index":0,"text":"Hel","finish_reason":null}]}`,
			`{"id":"cmpl-RID-a1-decode","created":1700000000,"model":"m","choices":[{"index":0,"text":"lo <b>&amp;</b> \u00e9","finish_reason":"length","stop_reason":null}]}`},
			"{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"logprobs\":null,\"text\":\"Hello \\u003cb\\u003e\\u0026amp;\\u003c/b\\u003e é\"}],\"created\":1700000000,\"id\":\"cmpl-RID\",\"model\":\"m\",\"object\":\"text_completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"completion with usage and stop_reason", false, []string{
			`{"id":"cmpl-x","created":1,"model":"m","choices":[{"text":"a"}]}`,
			`{"choices":[{"text":"b","finish_reason":"stop","stop_reason":13}]}`,
			`{"id":"cmpl-x","choices":[],"usage":{ "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }}`},
			"{\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"logprobs\":null,\"stop_reason\":13,\"text\":\"ab\"}],\"created\":1,\"id\":\"cmpl-x\",\"model\":\"m\",\"object\":\"text_completion\",\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}"},
		{"completion nothing", false, []string{`{"choices":[]}`},
			"{\"choices\":[{\"finish_reason\":null,\"index\":0,\"logprobs\":null,\"text\":\"\"}],\"created\":null,\"id\":\"\",\"model\":\"\",\"object\":\"text_completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"chat content reasoning refusal", true, []string{
			`{"id":"chatcmpl-1","created":5,"model":"m","choices":[{"delta":{"role":"assistant","content":""}}]}`,
			`{"choices":[{"delta":{"reasoning_content":"think "}}]}`,
			`{"choices":[{"delta":{"reasoning":"more"}}]}`,
			`{"choices":[{"delta":{"content":"hi"}}]}`,
			`{"choices":[{"delta":{"refusal":"no"},"finish_reason":"stop","stop_reason":"</s>"}]}`},
			"{\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"logprobs\":null,\"message\":{\"content\":\"hi\",\"reasoning_content\":\"think more\",\"refusal\":\"no\",\"role\":\"assistant\"},\"stop_reason\":\"\\u003c/s\\u003e\"}],\"created\":5,\"id\":\"chatcmpl-1\",\"model\":\"m\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"chat tool calls", true, []string{
			`{"id":"chatcmpl-2","created":6,"model":"m","choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"g","arguments":"{\"y\""}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}`},
			"{\"choices\":[{\"finish_reason\":\"tool_calls\",\"index\":0,\"logprobs\":null,\"message\":{\"content\":null,\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\",\"name\":\"f\"},\"id\":\"call_a\",\"type\":\"function\"},{\"function\":{\"arguments\":\"{\\\"y\\\":1}\",\"name\":\"g\"},\"id\":\"call_b\",\"type\":\"function\"}]}}],\"created\":6,\"id\":\"chatcmpl-2\",\"model\":\"m\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"chat function_call", true, []string{
			`{"id":"chatcmpl-3","created":7,"model":"m","choices":[{"delta":{"function_call":{"name":"f","arguments":"{"}}}]}`,
			`{"choices":[{"delta":{"function_call":{"arguments":"}"}},"finish_reason":"function_call"}]}`},
			"{\"choices\":[{\"finish_reason\":\"function_call\",\"index\":0,\"logprobs\":null,\"message\":{\"content\":null,\"function_call\":{\"arguments\":\"{}\",\"name\":\"f\"},\"role\":\"assistant\"}}],\"created\":7,\"id\":\"chatcmpl-3\",\"model\":\"m\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"chat empty", true, []string{`{"id":"chatcmpl-4","choices":[{"delta":{}}]}`},
			"{\"choices\":[{\"finish_reason\":null,\"index\":0,\"logprobs\":null,\"message\":{\"content\":\"\",\"role\":\"assistant\"}}],\"created\":null,\"id\":\"chatcmpl-4\",\"model\":\"\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
		{"chat reasoning only", true, []string{`{"choices":[{"delta":{"reasoning_content":"r"},"finish_reason":"length"}]}`},
			"{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"logprobs\":null,\"message\":{\"content\":null,\"reasoning_content\":\"r\",\"role\":\"assistant\"}}],\"created\":null,\"id\":\"\",\"model\":\"\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":7,\"total_tokens\":11}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssembler(tc.chat, 1<<20, rename)
			for _, ev := range tc.events {
				if e := a.Event(vllm.Event{Data: []byte(ev)}); e != nil {
					t.Fatalf("event refused: %s", fault.As(e).Msg)
				}
			}
			got, e := a.Body(7, 4)
			if e != nil {
				t.Fatalf("body: %s", fault.As(e).Msg)
			}
			if string(got) != tc.want {
				t.Errorf("body\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A stream the assembler cannot fold fails the leg as an invalid or
// oversized response, naming why.
func TestAssemblerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chat   bool
		limit  int
		events []vllm.Event
		reason fault.Reason
		msg    string
	}{
		{"not JSON", false, 100, []vllm.Event{{Data: []byte("oops"), NotJSON: true}}, fault.InvalidResponse, "not JSON"},
		{"malformed", false, 100, []vllm.Event{{Data: []byte(`{"choices":5}`)}}, fault.InvalidResponse, "malformed stream event"},
		{"over the limit", false, 30, []vllm.Event{{Data: []byte(`{"choices":[{"text":"0123456789"}]}`)}}, fault.ResponseLimit, "max_response_bytes"},
		{"tool call without an id", true, 1000, []vllm.Event{{Data: []byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}`)}},
			fault.InvalidResponse, "without an id or a function name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssembler(tc.chat, tc.limit, nil)
			var err error
			for _, ev := range tc.events {
				if err = a.Event(ev); err != nil {
					break
				}
			}
			if err == nil {
				_, err = a.Body(1, 1)
			}
			e := fault.As(err)
			if e == nil || e.Reason != tc.reason || e.Phase != "decode" || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got %+v, want decode %s naming %q", e, tc.reason, tc.msg)
			}
		})
	}
}
