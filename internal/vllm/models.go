package vllm

import (
	"context"
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// ModelCard is one entry of an engine's GET /v1/models: the served model
// id and, as vLLM reports it, the context length in tokens (prompt plus
// output; 0 when the engine does not say).
type ModelCard struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"`
}

// ModelCards reads GET /v1/models.
func (c *Client) ModelCards(ctx context.Context) ([]ModelCard, error) {
	b, e := c.get(ctx, "/v1/models", 4<<20)
	if e != nil {
		return nil, e
	}
	var out struct {
		Data []ModelCard `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, invalid(fault.Health, fault.ClassInferenceStatus, "/v1/models is not JSON: %v", err)
	}
	for i := range out.Data {
		out.Data[i].MaxModelLen = max(0, out.Data[i].MaxModelLen)
	}
	return out.Data, nil
}
