package vllm

import "testing"

func TestTokenizeBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		chat bool
		want string
	}{
		{"completion: the prompt only", `{"model":"client","prompt":"hi","max_tokens":9,"add_special_tokens":false,"messages":[]}`, false,
			`{"add_special_tokens":false,"model":"served","prompt":"hi"}`},
		{"chat: messages and their template", `{"messages":[{"role":"user","content":"hi"}],"prompt":"x","tools":[],"add_generation_prompt":true,"temperature":1}`, true,
			`{"add_generation_prompt":true,"messages":[{"role":"user","content":"hi"}],"model":"served","tools":[]}`},
	} {
		b, err := ParseBody([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(TokenizeBody(b, "served", tc.chat)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
