package openai

import (
	"encoding/json"
	"testing"
)

// fit is one prompt checked against a context of 2048 tokens (limit 0:
// none reported); param is the field refused, "" when it fits.
type fit struct {
	limit, n, wanted int
	exact, chat      bool
	param            string
}

var fits = map[string]fit{
	"no limit known":                            {limit: 0, n: 1 << 20, exact: true},
	"fits":                                      {limit: 2048, n: 100, wanted: 100, exact: true},
	"prompt at the context":                     {limit: 2048, n: 2048, exact: true, param: "prompt"},
	"chat prompt over":                          {limit: 2048, n: 3000, exact: true, chat: true, param: "messages"},
	"prompt and output over":                    {limit: 2048, n: 2000, wanted: 100, exact: true, param: "max_tokens"},
	"prompt and output exactly fit":             {limit: 2048, n: 2000, wanted: 48, exact: true},
	"an estimate is not refused":                {limit: 2048, n: 3000},
	"an estimate with an impossible max_tokens": {limit: 2048, n: 3000, wanted: 2048, param: "max_tokens"},
}

func TestContextError(t *testing.T) {
	for name, f := range fits {
		e := ContextError(f.limit, f.n, f.exact, f.chat, Request{Wanted: f.wanted, WantedParam: "max_tokens"})
		switch {
		case f.param == "" && e != nil:
			t.Errorf("%s: refused: %s", name, e.Message)
		case f.param != "" && (e == nil || e.Status != 400 || *e.Param != f.param || *e.Code != "context_length_exceeded"):
			t.Errorf("%s: %+v, want 400 context_length_exceeded on %s", name, e, f.param)
		}
	}
}

// The card leaves max_model_len out until an engine reported one.
func TestModelCard(t *testing.T) {
	cards := map[int]string{
		0:    `{"object":"list","data":[{"id":"m","object":"model","created":7,"owned_by":"narwhal"}]}`,
		4096: `{"object":"list","data":[{"id":"m","object":"model","created":7,"owned_by":"narwhal","max_model_len":4096}]}`,
	}
	for n, want := range cards {
		if b, _ := json.Marshal(Models(Card("m", 7, n))); string(b) != want {
			t.Errorf("max_model_len %d: %s, want %s", n, b, want)
		}
	}
}
