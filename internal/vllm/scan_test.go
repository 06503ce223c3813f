package vllm

import (
	"bytes"
	"reflect"
	"testing"
)

// vllmShapes are chunks as vLLM (and internal/simengine) write them.
var vllmShapes = []string{
	`{"id":"cmpl-r1-1-decode","object":"text_completion","created":1733000000,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[5]}]}`,
	`{"id":"cmpl-r1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a\u00e9\n","logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":[1,22,333]}]}`,
	`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
	`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" b"},"logprobs":null,"finish_reason":"stop","stop_reason":"\n","token_ids":[7,8]}]}`,
	`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"hm"},"logprobs":null,"finish_reason":null,"token_ids":[9]}]}`,
	`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":null,"token_ids":[3]}]}`,
	`{"id":"cmpl-r1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":28,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"id":"cmpl-r1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"],"token_logprobs":[-0.5],"top_logprobs":[{"x":-0.5,"\u00e9":-2.25e1}]},"finish_reason":null,"token_ids":[4]}],"usage":null}`,
}

// TestFastEventTakesVLLMShapes: the scanner must handle what engines send,
// or it saves nothing; and it must agree with encoding/json there.
func TestFastEventTakesVLLMShapes(t *testing.T) {
	for _, in := range vllmShapes {
		ev, ok := fastEvent([]byte(in))
		if !ok {
			t.Errorf("scanner gave up on a vLLM chunk: %s", in)
			continue
		}
		want, e := decodeEvent([]byte(in))
		if e != nil || !sameEvent(ev, want) {
			t.Errorf("%s\nscanner %+v\ndecoder %+v (%v)", in, ev, want, e)
		}
	}
}

// TestFastEventLeavesUnusualShapes: shapes whose meaning depends on
// encoding/json's rules go to the decoder.
func TestFastEventLeavesUnusualShapes(t *testing.T) {
	for _, in := range []string{
		`{"Choices":[{"text":"x"}]}`,                              // case-folded key
		`{"choices":[{"text":"x","token_ids":[1]}],"choices":[]}`, // duplicate key
		`{"error":{"message":"boom","code":500}}`,
		`{"choices":[{"text":"x","token_ids":["1"]}]}`, // quoted id
		`{"choices":[{"text":"x","token_ids":[-0]}]}`,
		`{"choices":[{"text":"x"}]}`, // output without ids: an error
		`{"choices":[{"te\u0078t":"x","token_ids":[1]}]}`,
		`{"choices":[{"text":5}]}`,
		`{"choices":[{"text":"x","token_ids":[1]}]} x`,
		`{"choices":[{"text":"x","token_ids":[01]}]}`,
		`[1]`, `null`, `hello`, ``,
	} {
		if ev, ok := fastEvent([]byte(in)); ok {
			t.Errorf("scanner took %s: %+v", in, ev)
		}
	}
}

func sameEvent(a, b Event) bool {
	if !bytes.Equal(a.Usage, b.Usage) {
		return false
	}
	a.Usage, b.Usage = nil, nil
	return reflect.DeepEqual(a, b)
}

// FuzzFastEvent: whenever the scanner answers, encoding/json gives the
// same event and no error.
func FuzzFastEvent(f *testing.F) {
	for _, in := range vllmShapes {
		f.Add([]byte(in))
	}
	for _, in := range []string{`{"choices":[{"text":"","delta":{"content":null,"tool_calls":[]}}]}`,
		`{"choices":null,"error":null,"usage":{}}`, `{"choices":[{"finish_reason":"st\"op"}]}`,
		`{"choices":[{"TEXT":"x","token_ids":[1]}]}`, `{"a":[1e5,-0.5,true,false,null,{"\u0000":[]}]}`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, ok := fastEvent(data)
		if !ok {
			return
		}
		want, e := decodeEvent(append([]byte(nil), data...))
		if e != nil || want.NotJSON || !sameEvent(ev, want) {
			t.Fatalf("%q\nscanner %+v\ndecoder %+v (%v)", data, ev, want, e)
		}
	})
}

func BenchmarkParseEvent(b *testing.B) {
	in := []byte(vllmShapes[0])
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseEvent(in)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeEvent(in)
		}
	})
}
