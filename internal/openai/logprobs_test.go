package openai

import (
	"encoding/json"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The assembler folds each chunk's logprobs into the one object a
// non-streamed vLLM answer carries, in order, values unchanged; a role
// chunk's null adds nothing, and a stream without logprobs assembles null.
func TestAssemblerLogprobs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chat   bool
		events []string
		want   string // the choice's logprobs
	}{
		{"chat", true, []string{
			`{"choices":[{"delta":{"role":"assistant","content":""},"logprobs":null}]}`,
			`{"choices":[{"delta":{"content":" a"},"logprobs":{"content":[{"token":" a","logprob":-0.5,"bytes":[32,97],"top_logprobs":[]}]}}]}`,
			`{"choices":[{"delta":{"content":" b"},"logprobs":{"content":[{"token":" b","logprob":-1e-3,"bytes":[32,98],"top_logprobs":[{"token":" b","logprob":-1e-3,"bytes":[32,98]}]}]}}]}`},
			`{"content":[{"token":" a","logprob":-0.5,"bytes":[32,97],"top_logprobs":[]},{"token":" b","logprob":-1e-3,"bytes":[32,98],"top_logprobs":[{"token":" b","logprob":-1e-3,"bytes":[32,98]}]}]}`},
		{"completion", false, []string{
			`{"choices":[{"text":" a","logprobs":{"text_offset":[0],"token_logprobs":[-0.5],"tokens":[" a"],"top_logprobs":[{" a":-0.5}]}}]}`,
			`{"choices":[{"text":" b","logprobs":{"text_offset":[2],"token_logprobs":[null],"tokens":[" b"],"top_logprobs":[null]}}]}`},
			`{"text_offset":[0,2],"token_logprobs":[-0.5,null],"tokens":[" a"," b"],"top_logprobs":[{" a":-0.5},null]}`},
		{"completion, none asked", false, []string{`{"choices":[{"text":" a","logprobs":null}]}`}, `null`},
		{"chat, none asked", true, []string{`{"choices":[{"delta":{"content":" a"},"logprobs":null}]}`}, `null`},
	} {
		a := NewAssembler(tc.chat, 1<<20, nil)
		for _, ev := range tc.events {
			if e := a.Event(vllm.Event{Data: []byte(ev)}); e != nil {
				t.Fatalf("%s: %v", tc.name, e)
			}
		}
		body, e := a.Body(1, 2)
		if e != nil {
			t.Fatalf("%s: %v", tc.name, e)
		}
		var got struct {
			Choices []struct{ Logprobs json.RawMessage }
		}
		if err := json.Unmarshal(body, &got); err != nil || len(got.Choices) != 1 {
			t.Fatalf("%s: %s (%v)", tc.name, body, err)
		}
		if string(got.Choices[0].Logprobs) != tc.want {
			t.Errorf("%s: logprobs\n  %s\nwant\n  %s", tc.name, got.Choices[0].Logprobs, tc.want)
		}
	}
}

// Logprobs that are not vLLM's shape fail the leg, not the client's JSON.
func TestAssemblerMalformedLogprobs(t *testing.T) {
	a := NewAssembler(false, 1<<20, nil)
	if e := a.Event(vllm.Event{Data: []byte(`{"choices":[{"text":"a","logprobs":{"tokens":5}}]}`)}); e == nil || fault.As(e).Reason != fault.InvalidResponse {
		t.Errorf("malformed logprobs accepted: %v", e)
	}
}
