package simengine

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Logprobs in vLLM's shapes. The request side is vLLM's check_logprobs;
// the response side is ChatCompletionLogProbs / ChatCompletionLogProbsContent
// (chat) and CompletionLogProbs (completions):
//
//	https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/chat_completion/protocol.py
//	https://github.com/vllm-project/vllm/blob/d5dba2d7b0ab9b98096560c69db7126b54b14d79/vllm/entrypoints/openai/completion/protocol.py
//
// filled as the serving code fills them (_create_chat_logprobs with
// _get_top_logprobs: top_logprobs entries per token, all of them for -1;
// _create_completion_logprobs: a dict of the top logprobs+1 ranks, which
// holds the sampled token, and text_offset counted from the text already
// streamed):
//
//	https://github.com/vllm-project/vllm/blob/5e918640d7b65820db5beaa98c2a99925bff7c17/vllm/entrypoints/openai/chat_completion/serving.py
//	https://github.com/vllm-project/vllm/blob/cc139d8ea6ff4db984778a3e77e95e1d1c7f1362/vllm/entrypoints/openai/completion/serving.py
//
// A stream carries each chunk's tokens' logprobs in that chunk; a
// non-streamed answer carries all of them. The simulated model is greedy:
// the sampled token is always rank 1, so a completions dict holds
// max(logprobs, 1) entries.

// parseLogprobs reads the logprobs fields: chat's logprobs (a boolean) and
// top_logprobs, completions' logprobs (an integer, the top count). The
// refusal is vLLM's message.
func parseLogprobs(b *genBody, chat bool) (on bool, top int, refusal string) {
	raw := b.Logprobs
	if len(raw) == 0 || string(raw) == "null" {
		raw = nil
	}
	if !chat {
		if raw == nil {
			return false, 0, ""
		}
		if json.Unmarshal(raw, &top) != nil || top < 0 {
			return false, 0, "`logprobs` must be a positive value."
		}
		return true, top, ""
	}
	if raw != nil && json.Unmarshal(raw, &on) != nil {
		return false, 0, "logprobs must be a boolean"
	}
	if b.TopLogprobs != nil {
		top = *b.TopLogprobs
		if top < 0 && top != -1 {
			return false, 0, "`top_logprobs` must be a positive value or -1."
		}
		if top != 0 && !on {
			return false, 0, "when using `top_logprobs`, `logprobs` must be set to true."
		}
	}
	return on, top, ""
}

// tokenLogprob is output token i's logprob for KV digest d: a pure
// function, like the token itself, so both legs and any retry agree.
func tokenLogprob(d uint64, i int) float64 {
	return -float64(1+mix(d^uint64(i)*0xff51afd7ed558ccd)%4000) / 1000
}

// ranked are token i's top n candidates, best first: the sampled word,
// then the words after it in the vocabulary, each 0.25 less likely.
func ranked(d uint64, i, n int) (words []string, lps []float64) {
	if n < 0 || n > len(vocab) {
		n = len(vocab) // -1: every candidate
	}
	w := int(mix(d+uint64(i)*0x9e3779b97f4a7c15) % uint64(len(vocab))) // TokenText's choice
	lp := tokenLogprob(d, i)
	for k := range n {
		words = append(words, " "+vocab[(w+k)%len(vocab)])
		lps = append(lps, lp-0.25*float64(k))
	}
	return words, lps
}

func fmtLogprob(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// chatLogprobs is ChatCompletionLogProbs for the output tokens at
// positions pos.
func (x *genRun) chatLogprobs(pos []int) string {
	n := x.g.topLogprobs
	if n == 0 {
		n = 1 // the sampled token's own entry
	}
	out := []byte(`{"content":[`)
	for j, i := range pos {
		if j > 0 {
			out = append(out, ',')
		}
		words, lps := ranked(x.digest, i, n)
		out = appendChatLogprob(append(out, '{'), words[0], lps[0])
		out = append(out, `,"top_logprobs":[`...)
		for k := range words {
			if x.g.topLogprobs == 0 {
				break
			}
			if k > 0 {
				out = append(out, ',')
			}
			out = append(appendChatLogprob(append(out, '{'), words[k], lps[k]), '}')
		}
		out = append(out, "]}"...)
	}
	return string(append(out, "]}"...))
}

// appendChatLogprob appends ChatCompletionLogProb's fields: token,
// logprob, bytes (the token's UTF-8).
func appendChatLogprob(out []byte, word string, lp float64) []byte {
	b, _ := json.Marshal(word)
	out = append(append(append(out, `"token":`...), b...), `,"logprob":`+fmtLogprob(lp)+`,"bytes":[`...)
	for j := 0; j < len(word); j++ {
		if j > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(word[j]), 10)
	}
	return append(out, ']')
}

// completionLogprobs is CompletionLogProbs for the output tokens at
// positions pos, whose text starts at offset.
func (x *genRun) completionLogprobs(pos []int, offset int) string {
	var offsets, lps, tokens, tops []string
	for _, i := range pos {
		words, ls := ranked(x.digest, i, max(x.g.topLogprobs, 1))
		offsets = append(offsets, strconv.Itoa(offset))
		offset += len(words[0])
		lps = append(lps, fmtLogprob(ls[0]))
		w, _ := json.Marshal(words[0])
		tokens = append(tokens, string(w))
		dict := "{"
		for k := range words {
			if k > 0 {
				dict += ","
			}
			key, _ := json.Marshal(words[k])
			dict += string(key) + ":" + fmtLogprob(ls[k])
		}
		tops = append(tops, dict+"}")
	}
	j := func(s []string) string { return strings.Join(s, ",") }
	return `{"text_offset":[` + j(offsets) + `],"token_logprobs":[` + j(lps) + `],"tokens":[` + j(tokens) +
		`],"top_logprobs":[` + j(tops) + `]}`
}

// takeLogprobs is the choice's logprobs for the tokens generated since the
// last call (a stream chunk's), or all of them (final true: a
// non-streamed answer): vLLM's object when the request asked, null
// otherwise.
func (x *genRun) takeLogprobs(final bool) string {
	if !x.g.logprobs {
		return "null"
	}
	pos, offset := x.lpPos[x.lpSent:], x.lpOffset
	if final {
		pos, offset = x.lpPos, 0
	}
	for _, i := range pos {
		x.lpOffset += len(TokenText(x.digest, i))
	}
	x.lpSent = len(x.lpPos)
	if x.g.chat {
		return x.chatLogprobs(pos)
	}
	return x.completionLogprobs(pos, offset)
}
