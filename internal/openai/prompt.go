package openai

import (
	"bytes"
	"encoding/json"
)

// PromptSize counts a valid body's token-id prompt exactly and otherwise
// returns the text a characters-per-token estimate would use: a chat's
// message text parts, or the prompt string(s).
func PromptSize(body map[string]json.RawMessage, chat bool) (n int, exact bool, text string) {
	if chat {
		var msgs []struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(body["messages"], &msgs)
		var b bytes.Buffer
		for _, m := range msgs {
			b.WriteString(contentText(m.Content))
		}
		return 0, false, b.String()
	}
	var ids []int
	if err := json.Unmarshal(body["prompt"], &ids); err == nil && len(ids) > 0 {
		return len(ids), true, ""
	}
	var one [][]int // Validate admits a batch of one prompt only
	if err := json.Unmarshal(body["prompt"], &one); err == nil && len(one) == 1 && len(one[0]) > 0 {
		return len(one[0]), true, ""
	}
	var s string
	if json.Unmarshal(body["prompt"], &s) == nil {
		return 0, false, s
	}
	var batch []string
	_ = json.Unmarshal(body["prompt"], &batch)
	var b bytes.Buffer
	for _, p := range batch {
		b.WriteString(p)
	}
	return 0, false, b.String()
}

// contentText is the text of a chat message's content: a string, or the
// text parts of a list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
