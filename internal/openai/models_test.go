package openai

import (
	"encoding/json"
	"testing"
)

func TestContextError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int
		chat   bool
		n      int
		exact  bool
		wanted int
		param  string
	}{
		{"no limit known", 0, false, 1 << 20, true, 0, ""},
		{"fits", 2048, false, 100, true, 100, ""},
		{"prompt at the context", 2048, false, 2048, true, 0, "prompt"},
		{"chat prompt over", 2048, true, 3000, true, 0, "messages"},
		{"prompt and output over", 2048, false, 2000, true, 100, "max_tokens"},
		{"prompt and output exactly fit", 2048, false, 2000, true, 48, ""},
		{"an estimate is not refused", 2048, false, 3000, false, 0, ""},
		{"an estimate with an impossible max_tokens", 2048, false, 3000, false, 2048, "max_tokens"},
	} {
		e := ContextError(tc.limit, tc.n, tc.exact, tc.chat, Request{Wanted: tc.wanted, WantedParam: "max_tokens"})
		switch {
		case tc.param == "" && e != nil:
			t.Errorf("%s: refused: %s", tc.name, e.Message)
		case tc.param != "" && (e == nil || e.Status != 400 || *e.Param != tc.param || *e.Code != "context_length_exceeded"):
			t.Errorf("%s: %+v, want 400 context_length_exceeded on %s", tc.name, e, tc.param)
		}
	}
}

func TestModelCard(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, `{"object":"list","data":[{"id":"m","object":"model","created":7,"owned_by":"narwhal"}]}`},
		{4096, `{"object":"list","data":[{"id":"m","object":"model","created":7,"owned_by":"narwhal","max_model_len":4096}]}`},
	} {
		b, _ := json.Marshal(Models(Card("m", 7, tc.n)))
		if string(b) != tc.want {
			t.Errorf("max_model_len %d: %s, want %s", tc.n, b, tc.want)
		}
	}
}
