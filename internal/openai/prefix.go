package openai

import "encoding/json"

// PricesCold reports whether a request's shape prices cold whatever is
// resident in any prefix cache (runtime reference §2.3): it truncates the
// prompt, carries documents or a reasoning effort (all change what the
// engine tokenizes), or is multimodal.
func PricesCold(body map[string]json.RawMessage) bool {
	for _, k := range []string{"truncate_prompt_tokens", "documents", "reasoning_effort"} {
		if v, ok := body[k]; ok && string(v) != "null" {
			return true
		}
	}
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(body["messages"], &msgs) != nil {
		return false
	}
	for _, m := range msgs {
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type != "text" {
				return true
			}
		}
	}
	return false
}

// PromptIDs is a token-id prompt's ids (a flat array, or a batch of one);
// nil for a text prompt.
func PromptIDs(body map[string]json.RawMessage) []int {
	var ids []int
	if json.Unmarshal(body["prompt"], &ids) == nil {
		return ids
	}
	var one [][]int
	if json.Unmarshal(body["prompt"], &one) == nil && len(one) == 1 {
		return one[0]
	}
	return nil
}
