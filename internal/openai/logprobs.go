package openai

import "encoding/json"

// logprobs folds the per-chunk logprobs of a decode stream into the one
// object of a non-streamed choice, as vLLM's non-streamed answer has it:
// chat's ChatCompletionLogProbs {"content": [...]} with every chunk's
// entries in order, completions' CompletionLogProbs with its four lists
// concatenated (a chunk's text_offset already counts from the text
// streamed before it). Shapes:
//
//	https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/chat_completion/protocol.py
//	https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/completion/protocol.py
//
// Entries stay raw JSON (compacted): the client gets the engine's numbers
// and token strings unchanged.
type logprobs struct {
	seen       bool
	content    []json.RawMessage
	completion completionLogprobs
}

type completionLogprobs struct {
	TextOffset    []json.RawMessage `json:"text_offset"`
	TokenLogprobs []json.RawMessage `json:"token_logprobs"`
	Tokens        []json.RawMessage `json:"tokens"`
	TopLogprobs   []json.RawMessage `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []json.RawMessage `json:"content"`
}

// add folds one choice's logprobs (not null).
func (l *logprobs) add(chat bool, raw json.RawMessage) error {
	l.seen = true
	if chat {
		var c chatLogprobs
		if err := json.Unmarshal(raw, &c); err != nil {
			return err
		}
		l.content = append(l.content, c.Content...)
		return nil
	}
	var c completionLogprobs
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	o := &l.completion
	o.TextOffset = append(o.TextOffset, c.TextOffset...)
	o.TokenLogprobs = append(o.TokenLogprobs, c.TokenLogprobs...)
	o.Tokens = append(o.Tokens, c.Tokens...)
	o.TopLogprobs = append(o.TopLogprobs, c.TopLogprobs...)
	return nil
}

// body is the folded object, or nil (null) when no chunk carried logprobs.
func (l *logprobs) body(chat bool) json.RawMessage {
	if !l.seen {
		return nil
	}
	var v any
	if chat {
		v = chatLogprobs{Content: list(l.content)}
	} else {
		c := l.completion
		v = completionLogprobs{TextOffset: list(c.TextOffset), TokenLogprobs: list(c.TokenLogprobs),
			Tokens: list(c.Tokens), TopLogprobs: list(c.TopLogprobs)}
	}
	out, _ := json.Marshal(v) // raw values that parsed always marshal
	return out
}

// list is s, or an empty list: vLLM's lists default to [], never null.
func list(s []json.RawMessage) []json.RawMessage {
	if s == nil {
		return []json.RawMessage{}
	}
	return s
}
