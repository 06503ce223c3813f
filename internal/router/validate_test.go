package router

import (
	"encoding/json"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// validate accepts every shape an engine serves as one request and
// refuses the rest with the field that is wrong.
func TestValidate(t *testing.T) {
	cfg := fleet.Defaults()
	cfg.Model = "m"
	r := &Router{cfg: &cfg}
	for _, tc := range []struct {
		name  string
		chat  bool
		body  string
		param string // "" when the body is valid
		code  string
	}{
		{"string prompt", false, `{"prompt":"hi","max_tokens":3}`, "", ""},
		{"token ids", false, `{"prompt":[1,2,3]}`, "", ""},
		{"a batch of one string", false, `{"prompt":["hi"]}`, "", ""},
		{"a batch of one token list", false, `{"prompt":[[1,2]]}`, "", ""},
		{"nulls pass", false, `{"prompt":"hi","n":null,"max_tokens":null,"stream_options":null,"model":null}`, "", ""},
		{"n 1", false, `{"prompt":"hi","n":1,"best_of":1}`, "", ""},
		{"stream_options with stream", false, `{"prompt":"hi","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`, "", ""},
		{"chat text parts", true, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null}]}`, "", ""},
		{"chat string content", true, `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":5}`, "", ""},
		{"prompt a number", false, `{"prompt":5}`, "prompt", "invalid_type"},
		{"prompt missing", false, `{"max_tokens":3}`, "prompt", "invalid_type"},
		{"negative token id", false, `{"prompt":[1,-2]}`, "prompt", "invalid_value"},
		{"float token id", false, `{"prompt":[1,2.5]}`, "prompt", "invalid_value"},
		{"empty token list", false, `{"prompt":[]}`, "prompt", "invalid_value"},
		{"nested batch", false, `{"prompt":[[[1]]]}`, "prompt", "invalid_type"},
		{"batch of token lists", false, `{"prompt":[[1],[2]]}`, "prompt", "unsupported_value"},
		{"max_tokens 5.0", false, `{"prompt":"hi","max_tokens":5.0}`, "max_tokens", "invalid_type"},
		{"best_of 0", false, `{"prompt":"hi","best_of":0}`, "best_of", "invalid_value"},
		{"best_of 3", false, `{"prompt":"hi","best_of":3}`, "best_of", "unsupported_value"},
		{"audio part", true, `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0]", "unsupported_value"},
		{"part without a type", true, `{"messages":[{"role":"user","content":[{"text":"a"}]}]}`, "messages[0].content[0]", "invalid_type"},
		{"content a number", true, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", "invalid_type"},
		{"stream_options an array", false, `{"prompt":"hi","stream":true,"stream_options":[]}`, "stream_options", "invalid_type"},
		{"continuous_usage_stats a number", false, `{"prompt":"hi","stream":true,"stream_options":{"continuous_usage_stats":1}}`, "stream_options.continuous_usage_stats", "invalid_type"},
		{"another model", false, `{"model":"other","prompt":"hi"}`, "model", "model_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
				t.Fatal(err)
			}
			c := &call{r: r, chat: tc.chat}
			e := c.validate(b)
			switch {
			case tc.param == "" && e != nil:
				t.Errorf("refused a valid body: %+v", *e)
			case tc.param != "" && e == nil:
				t.Errorf("accepted; want %s on %s", tc.code, tc.param)
			case tc.param != "" && (e.Param == nil || *e.Param != tc.param || e.Code == nil || *e.Code != tc.code):
				t.Errorf("param %v code %v, want %s %s (%s)", e.Param, e.Code, tc.param, tc.code, e.Message)
			}
		})
	}
}

func TestContextError(t *testing.T) {
	r := &Router{}
	r.setModelLen("a", 4096)
	r.setModelLen("b", 2048) // the smallest context bounds every leg
	r.setModelLen("c", 0)    // an engine that does not say is ignored
	for _, tc := range []struct {
		name   string
		chat   bool
		n      int
		exact  bool
		wanted int
		param  string
	}{
		{"fits", false, 100, true, 100, ""},
		{"prompt at the context", false, 2048, true, 0, "prompt"},
		{"chat prompt over", true, 3000, true, 0, "messages"},
		{"prompt and output over", false, 2000, true, 100, "max_tokens"},
		{"an estimate is not refused", false, 3000, false, 0, ""},
		{"an estimate with an impossible max_tokens", false, 3000, false, 2048, "max_tokens"},
	} {
		c := &call{r: r, chat: tc.chat, wanted: tc.wanted, wantedParam: "max_tokens"}
		e := c.contextError(tc.n, tc.exact)
		switch {
		case tc.param == "" && e != nil:
			t.Errorf("%s: refused: %s", tc.name, e.Message)
		case tc.param != "" && (e == nil || *e.Param != tc.param || *e.Code != "context_length_exceeded"):
			t.Errorf("%s: %+v, want context_length_exceeded on %s", tc.name, e, tc.param)
		}
	}
	if (&call{r: &Router{}}).contextError(1<<20, true) != nil {
		t.Error("with no max_model_len reported nothing is refused")
	}
}
