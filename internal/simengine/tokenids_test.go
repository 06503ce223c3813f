package simengine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// With return_token_ids every chunk that carries text carries the ids of
// exactly that text, as vLLM does; without it no chunk has the field.
func TestStreamTokenIDs(t *testing.T) {
	e := startEngine(t, nil)
	for _, chat := range []bool{false, true} {
		for _, want := range []bool{true, false} {
			body := map[string]any{"model": e.Model(), "max_tokens": 6, "stream": true, "return_token_ids": want}
			path := "/v1/completions"
			if chat {
				path = "/v1/chat/completions"
				body["messages"] = []map[string]string{{"role": "user", "content": "hello there"}}
			} else {
				body["prompt"] = "hello there"
			}
			_, raw := post(t, e.URL()+path, body)
			var text strings.Builder
			var ids []int64
			for _, ev := range testkit.SSEData(t, raw) {
				if ev == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Text     string `json:"text"`
						Delta    struct{ Content string }
						TokenIDs []int64 `json:"token_ids"`
					}
				}
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Fatal(err)
				}
				for _, ch := range c.Choices {
					piece := ch.Text + ch.Delta.Content
					if want && piece != "" && len(ch.TokenIDs) == 0 {
						t.Errorf("chat=%v: chunk with text %q has no token_ids", chat, piece)
					}
					if !want && ch.TokenIDs != nil {
						t.Errorf("chat=%v: token_ids sent without return_token_ids", chat)
					}
					text.WriteString(piece)
					ids = append(ids, ch.TokenIDs...)
				}
			}
			if !want {
				continue
			}
			got, err := Detokenize(ids)
			if err != nil || got != text.String() || len(ids) != 6 {
				t.Errorf("chat=%v: ids %v detokenize to %q (%v), text %q", chat, ids, got, err, text.String())
			}
		}
	}
}
