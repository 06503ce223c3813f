package sweep

import (
	"context"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// filler is the word prompts are padded with: one token in the common
// BPE vocabularies and in simengine's tokenizer.
const filler = " the"

// prompter builds prompts of an exact token count, checked on the
// engine's own /tokenize (operations.md §6.1).
type prompter struct {
	c      *vllm.Client
	model  string
	maxLen int
}

// build returns lead followed by fillers, tokenising to exactly n tokens.
// Different leads give prompts that share no first KV block, so a prefix
// cache cannot serve one from another.
func (p *prompter) build(ctx context.Context, lead string, n int) (string, error) {
	k := n
	if tc, e := p.c.TokenizeText(ctx, p.model, lead); e == nil {
		k = n - tc.Count
	}
	for try := 0; try < 6 && k >= 0; try++ {
		text := lead + strings.Repeat(filler, k)
		tc, e := p.c.TokenizeText(ctx, p.model, text)
		if e != nil {
			return "", fmt.Errorf("/tokenize: %s", fault.Detail(e))
		}
		if tc.Count == n {
			return text, nil
		}
		k += n - tc.Count
	}
	return "", fmt.Errorf("could not build a prompt of exactly %d tokens through /tokenize (the tokenizer does not count %q as one token)", n, filler)
}

// completionBody is a non-streamed one-token completion: a timed prefill.
func completionBody(model, prompt string) []byte {
	return mustJSON(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": false})
}

// streamBody asks for exactly tokens tokens, one per SSE event.
func streamBody(model, prompt string, tokens int) []byte {
	return mustJSON(map[string]any{"model": model, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens,
		"ignore_eos": true, "temperature": 0, "stream": true, "stream_options": map[string]any{"include_usage": true},
		"return_token_ids": true})
}

// extend appends fillers to prefix until the whole text is n tokens.
func (p *prompter) extend(ctx context.Context, prefix string, n int) (string, error) {
	return p.build(ctx, prefix, n)
}
