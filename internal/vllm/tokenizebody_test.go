package vllm

import "testing"

// TokenizeBody keeps the fields /tokenize reads and names the served model.
func TestTokenizeBody(t *testing.T) {
	completion := `{"model":"client","prompt":"hi","max_tokens":9,"add_special_tokens":false,"messages":[]}`
	chat := `{"messages":[{"role":"user","content":"hi"}],"prompt":"x","tools":[],"add_generation_prompt":true,"temperature":1}`
	want := map[bool]string{
		false: `{"add_special_tokens":false,"model":"served","prompt":"hi"}`,
		true:  `{"add_generation_prompt":true,"messages":[{"role":"user","content":"hi"}],"model":"served","tools":[]}`,
	}
	for isChat, body := range map[bool]string{false: completion, true: chat} {
		b, err := ParseBody([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(TokenizeBody(b, "served", isChat)); got != want[isChat] {
			t.Errorf("chat %v: %s, want %s", isChat, got, want[isChat])
		}
	}
}
