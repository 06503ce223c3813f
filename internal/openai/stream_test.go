package openai

import "testing"

var stripCases = map[string]string{
	`{"choices":[{"text":"a","token_ids":[1,2]}]}`:                        `{"choices":[{"text":"a"}]}`,
	`{"choices":[{"token_ids":[1],"text":"a"}]}`:                          `{"choices":[{"text":"a"}]}`,
	`{"prompt_token_ids":[3],"choices":[{"text":"x","token_ids":[]}]}`:    `{"choices":[{"text":"x"}]}`,
	`{"choices":[{"text":"say \"token_ids\":[1] here","token_ids":[9]}]}`: `{"choices":[{"text":"say \"token_ids\":[1] here"}]}`,
	`{"choices":[{"text":"a"},{"text":"b","token_ids":[4]}]}`:             `{"choices":[{"text":"a"},{"text":"b"}]}`,
	`{"usage":{"prompt_tokens":1}}`:                                       `{"usage":{"prompt_tokens":1}}`,
}

func TestStripTokenIDs(t *testing.T) {
	for in, want := range stripCases {
		b := []byte(in)
		if got := string(StripTokenIDs(b)); got != want {
			t.Errorf("StripTokenIDs(%s)\n = %s\nwant %s", in, got, want)
		}
		if string(b) != in {
			t.Errorf("StripTokenIDs changed its input to %s", b)
		}
	}
}

func TestStripTokenIDsInPlace(t *testing.T) {
	for in, want := range stripCases {
		b := []byte(in)
		got := StripTokenIDsInPlace(b)
		if string(got) != want || (len(got) > 0 && &got[0] != &b[0]) {
			t.Errorf("StripTokenIDsInPlace(%s) = %s (same array: %v), want %s", in, got, len(got) > 0 && &got[0] == &b[0], want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { StripTokenIDsInPlace([]byte(`{"choices":[{"text":"a","token_ids":[1,2]}]}`)) }); n > 1 {
		t.Errorf("StripTokenIDsInPlace allocates %v times, want only the test's own input", n)
	}
}
