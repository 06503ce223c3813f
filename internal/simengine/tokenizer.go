package simengine

import (
	"fmt"
	"strings"
)

// The simulated tokenizer: text is cut into words at whitespace→non-space
// boundaries (a word keeps its leading whitespace, as GPT-style BPE does),
// and each word into pieces of at most 4 bytes. A piece's id is its bytes,
// big-endian, tagged with its length: (len-1)<<32 | bytes. So every id
// detokenizes exactly, ~4 characters make a token, and counting is cheap.
const maxPiece = 4

// Tokenize returns the token ids of text.
func Tokenize(text string) []int64 {
	ids := make([]int64, 0, len(text)/3+1)
	forEachPiece(text, func(p string) { ids = append(ids, pieceID(p)) })
	return ids
}

// CountTokens is len(Tokenize(text)) without allocating.
func CountTokens(text string) int {
	n := 0
	forEachPiece(text, func(string) { n++ })
	return n
}

func forEachPiece(text string, f func(string)) {
	start := 0
	for start < len(text) {
		end := wordEnd(text, start)
		for p := start; p < end; p += maxPiece {
			f(text[p:min(p+maxPiece, end)])
		}
		start = end
	}
}

// wordEnd returns the end of the word starting at i: leading whitespace,
// then non-whitespace up to the next whitespace.
func wordEnd(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

func pieceID(p string) int64 {
	var v int64
	for i := 0; i < len(p); i++ {
		v = v<<8 | int64(p[i])
	}
	return int64(len(p)-1)<<32 | v
}

// TokenString is the text of one id.
func TokenString(id int64) (string, error) {
	n := int(id>>32) + 1
	if id < 0 || n > maxPiece {
		return "", fmt.Errorf("token id %d is not in the simulated vocabulary", id)
	}
	b := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(id)
		id >>= 8
	}
	return string(b), nil
}

// Detokenize joins the pieces of ids.
func Detokenize(ids []int64) (string, error) {
	var sb strings.Builder
	for _, id := range ids {
		s, err := TokenString(id)
		if err != nil {
			return "", err
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}

// ChatMessage is one chat turn; content may be a string or text parts.
type ChatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// ChatPrompt renders messages with the simulated chat template:
// "<|role|>\ncontent\n" per turn, then "<|assistant|>\n".
func ChatPrompt(msgs []ChatMessage) (string, error) {
	var sb strings.Builder
	for i, m := range msgs {
		if m.Role == "" {
			return "", fmt.Errorf("messages[%d].role is required", i)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return "", fmt.Errorf("messages[%d].content %v", i, err)
		}
		sb.WriteString("<|" + m.Role + "|>\n" + text + "\n")
	}
	sb.WriteString("<|assistant|>\n")
	return sb.String(), nil
}

func contentText(c any) (string, error) {
	switch v := c.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []any:
		var sb strings.Builder
		for _, p := range v {
			m, ok := p.(map[string]any)
			if !ok || m["type"] != "text" {
				return "", fmt.Errorf("parts must be {\"type\":\"text\",\"text\":...}")
			}
			s, _ := m["text"].(string)
			sb.WriteString(s)
		}
		return sb.String(), nil
	}
	return "", fmt.Errorf("must be a string or a list of text parts")
}
