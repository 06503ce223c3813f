package vllm

import "context"

// ServerDevices reads GET /v1/server/devices: the engine's own report of
// its devices, one per rank (vllm-project/vllm
// vllm/entrypoints/serve/devices/api_router.py at
// 38a7fe0f7d03a32616b9c3341210497f00c03255). Older vLLM answers 404
// (a fault.Error's Status). The body is returned unparsed; internal/attest
// reads it.
func (c *Client) ServerDevices(ctx context.Context) ([]byte, error) {
	return c.get(ctx, "/v1/server/devices", 1<<20)
}
