package simengine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// vLLM's logprobs shapes (logprobs.go cites them), decoded strictly enough
// that a wrong key or type fails.
type chatLP struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

type completionLP struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

type lpChoice struct {
	Text     string
	Delta    *struct{ Content string }
	Message  *struct{ Content string }
	Logprobs json.RawMessage
}

// folded is one response's text and logprobs, streamed or not.
type folded struct {
	text       string
	chat       []chatLP
	completion completionLP
	nulls      int // choices whose logprobs were null
	choices    int
}

func (f *folded) add(t *testing.T, chat bool, c lpChoice) {
	t.Helper()
	f.choices++
	if c.Delta != nil {
		f.text += c.Delta.Content
	}
	if c.Message != nil {
		f.text += c.Message.Content
	}
	f.text += c.Text
	if len(c.Logprobs) == 0 || string(c.Logprobs) == "null" {
		f.nulls++
		return
	}
	dec := json.NewDecoder(strings.NewReader(string(c.Logprobs)))
	dec.DisallowUnknownFields()
	if chat {
		var lp struct {
			Content []chatLP `json:"content"`
		}
		if err := dec.Decode(&lp); err != nil {
			t.Fatalf("chat logprobs %s: %v", c.Logprobs, err)
		}
		f.chat = append(f.chat, lp.Content...)
		return
	}
	var lp completionLP
	if err := dec.Decode(&lp); err != nil {
		t.Fatalf("completion logprobs %s: %v", c.Logprobs, err)
	}
	f.completion.TextOffset = append(f.completion.TextOffset, lp.TextOffset...)
	f.completion.TokenLogprobs = append(f.completion.TokenLogprobs, lp.TokenLogprobs...)
	f.completion.Tokens = append(f.completion.Tokens, lp.Tokens...)
	f.completion.TopLogprobs = append(f.completion.TopLogprobs, lp.TopLogprobs...)
}

func runLogprobs(t *testing.T, e *Engine, chat, stream bool, extra map[string]any) folded {
	t.Helper()
	body := map[string]any{"model": e.Model(), "max_tokens": 6, "stream": stream}
	path := "/v1/completions"
	if chat {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": "hello there"}}
	} else {
		body["prompt"] = "hello there"
	}
	for k, v := range extra {
		body[k] = v
	}
	resp, raw := post(t, e.URL()+path, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var f folded
	events := []string{string(raw)}
	if stream {
		events = testkit.SSEData(t, raw)
	}
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c struct{ Choices []lpChoice }
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			f.add(t, chat, ch)
		}
	}
	return f
}

// With logprobs the engine answers vLLM's shapes, one entry per output
// token whose text is the output, the sampled token first among its
// candidates, as many candidates as asked; streamed and not, the same.
func TestLogprobsShapes(t *testing.T) {
	e := startEngine(t, nil)
	for _, tc := range []struct {
		chat bool
		top  int // chat top_logprobs, completions logprobs
		want int // candidates per token
	}{
		{true, 0, 0}, {true, 3, 3}, {true, -1, len(vocab)},
		{false, 0, 1}, {false, 2, 2}, {false, 5, 5},
	} {
		extra := map[string]any{"logprobs": tc.top}
		if tc.chat {
			extra = map[string]any{"logprobs": true, "top_logprobs": tc.top}
		}
		var seen []folded
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("chat=%v top=%d stream=%v", tc.chat, tc.top, stream)
			f := runLogprobs(t, e, tc.chat, stream, extra)
			if tc.chat {
				checkChatLP(t, name, f, tc.want)
			} else {
				checkCompletionLP(t, name, f, tc.want)
			}
			f.nulls, f.choices = 0, 0 // the role chunk's null differs by mode
			seen = append(seen, f)
		}
		if !reflect.DeepEqual(seen[0], seen[1]) {
			t.Errorf("chat=%v top=%d: streamed logprobs differ from the non-streamed answer", tc.chat, tc.top)
		}
	}
}

func checkChatLP(t *testing.T, name string, f folded, want int) {
	t.Helper()
	if len(f.chat) != 6 {
		t.Fatalf("%s: %d logprobs entries for 6 tokens", name, len(f.chat))
	}
	var text strings.Builder
	for i, c := range f.chat {
		text.WriteString(c.Token)
		if string(runesToBytes(c.Bytes)) != c.Token || c.Logprob >= 0 {
			t.Errorf("%s: entry %d %+v: bytes or logprob wrong", name, i, c)
		}
		if len(c.TopLogprobs) != want {
			t.Errorf("%s: entry %d has %d top_logprobs, want %d", name, i, len(c.TopLogprobs), want)
		}
		if want > 0 && (c.TopLogprobs[0].Token != c.Token || c.TopLogprobs[0].Logprob != c.Logprob) {
			t.Errorf("%s: entry %d: the sampled token is not the first candidate", name, i)
		}
		for k := 1; k < len(c.TopLogprobs); k++ {
			if c.TopLogprobs[k].Logprob > c.TopLogprobs[k-1].Logprob {
				t.Errorf("%s: entry %d: candidates not best first", name, i)
			}
		}
	}
	if text.String() != f.text {
		t.Errorf("%s: logprobs tokens %q, output %q", name, text.String(), f.text)
	}
}

func checkCompletionLP(t *testing.T, name string, f folded, want int) {
	t.Helper()
	c := f.completion
	if len(c.Tokens) != 6 || len(c.TokenLogprobs) != 6 || len(c.TextOffset) != 6 || len(c.TopLogprobs) != 6 {
		t.Fatalf("%s: %d/%d/%d/%d entries for 6 tokens", name, len(c.Tokens), len(c.TokenLogprobs), len(c.TextOffset), len(c.TopLogprobs))
	}
	offset := 0
	for i, tok := range c.Tokens {
		if c.TextOffset[i] != offset {
			t.Errorf("%s: text_offset[%d] = %d, want %d", name, i, c.TextOffset[i], offset)
		}
		offset += len(tok)
		if len(c.TopLogprobs[i]) != want {
			t.Errorf("%s: top_logprobs[%d] has %d entries, want %d", name, i, len(c.TopLogprobs[i]), want)
		}
		if lp, ok := c.TopLogprobs[i][tok]; !ok || lp != c.TokenLogprobs[i] {
			t.Errorf("%s: top_logprobs[%d] lacks the sampled token %q at its logprob", name, i, tok)
		}
	}
	if strings.Join(c.Tokens, "") != f.text {
		t.Errorf("%s: logprobs tokens %q, output %q", name, strings.Join(c.Tokens, ""), f.text)
	}
}

func runesToBytes(b []int) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = byte(v)
	}
	return out
}

// Without logprobs every choice says null, as vLLM's do; the logprobs
// refusals are vLLM's check_logprobs.
func TestLogprobsOffAndRefused(t *testing.T) {
	e := startEngine(t, nil)
	for _, chat := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			f := runLogprobs(t, e, chat, stream, nil)
			if f.nulls != f.choices || f.choices == 0 {
				t.Errorf("chat=%v stream=%v: %d of %d choices have logprobs nobody asked for", chat, stream, f.choices-f.nulls, f.choices)
			}
		}
	}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "a"}}, "top_logprobs": 2}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "a"}}, "logprobs": true, "top_logprobs": -2}},
		{"/v1/completions", map[string]any{"prompt": "a", "logprobs": -1}},
	} {
		tc.body["model"] = e.Model()
		if resp, raw := post(t, e.URL()+tc.path, tc.body); resp.StatusCode != 400 {
			t.Errorf("%v: %d %s, want 400", tc.body, resp.StatusCode, raw)
		}
	}
}
