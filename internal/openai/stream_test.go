package openai

import "testing"

func TestStripTokenIDs(t *testing.T) {
	for in, want := range map[string]string{
		`{"choices":[{"text":"a","token_ids":[1,2]}]}`:                        `{"choices":[{"text":"a"}]}`,
		`{"choices":[{"token_ids":[1],"text":"a"}]}`:                          `{"choices":[{"text":"a"}]}`,
		`{"prompt_token_ids":[3],"choices":[{"text":"x","token_ids":[]}]}`:    `{"choices":[{"text":"x"}]}`,
		`{"choices":[{"text":"say \"token_ids\":[1] here","token_ids":[9]}]}`: `{"choices":[{"text":"say \"token_ids\":[1] here"}]}`,
		`{"choices":[{"text":"a"},{"text":"b","token_ids":[4]}]}`:             `{"choices":[{"text":"a"},{"text":"b"}]}`,
		`{"usage":{"prompt_tokens":1}}`:                                       `{"usage":{"prompt_tokens":1}}`,
	} {
		if got := string(StripTokenIDs([]byte(in))); got != want {
			t.Errorf("StripTokenIDs(%s)\n = %s\nwant %s", in, got, want)
		}
	}
}
