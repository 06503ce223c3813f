package openai

import (
	"encoding/json"
	"testing"
)

// body decodes a test's request body the way the router parses one.
func body(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var b map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// Validate accepts every shape an engine serves as one request and
// refuses the rest with the field that is wrong.
func TestValidate(t *testing.T) {
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
			_, e := Validate(body(t, tc.body), tc.chat, "m")
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

// Validate returns what the router reads from a valid body: the stream
// flag, whether the client asked for token ids itself, and the output
// length with the field it came from (max_completion_tokens wins).
func TestValidateReturnsTheFieldsTheRouterReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want Request
	}{
		{"defaults", `{"prompt":"hi"}`, Request{WantedParam: "max_tokens"}},
		{"stream and token ids", `{"prompt":"hi","stream":true,"return_token_ids":true,"max_tokens":4}`,
			Request{Stream: true, ClientTokenIDs: true, Wanted: 4, WantedParam: "max_tokens"}},
		{"max_completion_tokens wins", `{"prompt":"hi","max_tokens":4,"max_completion_tokens":9}`,
			Request{Wanted: 9, WantedParam: "max_completion_tokens"}},
		{"the served model", `{"model":"m","prompt":"hi","max_tokens":null}`, Request{WantedParam: "max_tokens"}},
	} {
		got, e := Validate(body(t, tc.body), false, "m")
		if e != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, e, tc.want)
		}
	}
}
