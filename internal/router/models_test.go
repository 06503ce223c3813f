package router

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/openai"
)

func TestContextError(t *testing.T) {
	r := &Router{}
	r.models.Set("a", 4096)
	r.models.Set("b", 2048) // the smallest context bounds every leg
	r.models.Set("c", 0)    // an engine that does not say is ignored
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
		c := &call{r: r, ex: exchange{chat: tc.chat}, adm: admission{q: openai.Request{Wanted: tc.wanted, WantedParam: "max_tokens"}}}
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
