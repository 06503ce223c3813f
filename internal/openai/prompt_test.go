package openai

import (
	"strings"
	"testing"
)

// A token-id prompt (or a batch of one) is counted exactly; text is
// returned for the estimate: the prompt string(s), or a chat's string
// contents and text parts only. A body with messages is a chat.
func TestPromptSize(t *testing.T) {
	type size struct {
		n     int
		exact bool
		text  string
	}
	cases := map[string]size{
		`{"prompt":[5,6,7]}`:      {3, true, ""},
		`{"prompt":[[5,6]]}`:      {2, true, ""},
		`{"prompt":"hello"}`:      {0, false, "hello"},
		`{"prompt":["hel","lo"]}`: {0, false, "hello"},
		`{"messages":[{"role":"user","content":"ab"},{"role":"user","content":[{"type":"text","text":"cd"},{"type":"refusal","refusal":"x"}]},{"role":"assistant","content":null}]}`: {0, false, "abcd"},
	}
	for b, want := range cases {
		var got size
		got.n, got.exact, got.text = PromptSize(body(t, b), strings.HasPrefix(b, `{"messages"`))
		if got != want {
			t.Errorf("%s: %+v, want %+v", b, got, want)
		}
	}
}
