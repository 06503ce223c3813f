package openai

import "fmt"

// ModelCard is one entry of GET /v1/models.
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen *int   `json:"max_model_len,omitempty"` // absent until an engine reported it
}

// Card is the served model's card; maxModelLen 0 (no engine reported one)
// leaves max_model_len out.
func Card(model string, created int64, maxModelLen int) ModelCard {
	card := ModelCard{ID: model, Object: "model", Created: created, OwnedBy: "narwhal"}
	if maxModelLen > 0 {
		card.MaxModelLen = &maxModelLen
	}
	return card
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// Models lists cards.
func Models(cards ...ModelCard) ModelList { return ModelList{Object: "list", Data: cards} }

// ContextError refuses a prompt that cannot fit the model's context of
// limit tokens (max_model_len; 0 when unknown: nothing is refused), or one
// whose requested output (q.Wanted) would not fit beside it, the way vLLM
// would after the router had paid for a leg. exact says n is a real token
// count; an estimate is checked only as the one token a prompt has at
// least.
func ContextError(limit, n int, exact, chat bool, q Request) *Error {
	if limit == 0 {
		return nil
	}
	param := "prompt"
	if chat {
		param = "messages"
	}
	if !exact {
		n = 1
	}
	if n >= limit {
		return BadRequest("context_length_exceeded", param, fmt.Sprintf(
			"the prompt has %d tokens; the model's context is %d tokens (max_model_len) and must also hold the output: shorten the prompt",
			n, limit))
	}
	if q.Wanted > 0 && n+q.Wanted > limit {
		return BadRequest("context_length_exceeded", q.WantedParam, fmt.Sprintf(
			"%s %d and the prompt's %d tokens exceed the model's context of %d tokens (max_model_len): ask for at most %d",
			q.WantedParam, q.Wanted, n, limit, limit-n))
	}
	return nil
}
