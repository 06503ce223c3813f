package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TokenCount is /tokenize's answer.
type TokenCount struct {
	Count       int
	MaxModelLen int   // 0 when the engine does not say
	IDs         []int // the prompt's token ids; nil unless they are non-negative ints as many as Count
}

// TokenizeText counts prompt on the engine's /tokenize route, with the
// engine's max_model_len, so the profiler can build exactly tokenised
// prompts and keep them inside the context.
func (c *Client) TokenizeText(ctx context.Context, model, prompt string) (TokenCount, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "add_special_tokens": true})
	return c.tokenize(ctx, fault.Health, body)
}

// tokenize posts body to /tokenize; phase labels errors (admission for the
// router's counting, health for probes and the profiler).
func (c *Client) tokenize(ctx context.Context, phase fault.Phase, body []byte) (TokenCount, error) {
	b, e := c.call(ctx, phase, http.MethodPost, "/tokenize", body, "", 64<<20)
	if e != nil {
		return TokenCount{}, e
	}
	var out struct {
		Count       *int            `json:"count"`
		MaxModelLen int             `json:"max_model_len"`
		Tokens      json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Count == nil || *out.Count < 0 {
		return TokenCount{}, invalid(phase, fault.ClassInferenceStatus, "/tokenize answered without a count")
	}
	var ids []int
	if json.Unmarshal(out.Tokens, &ids) != nil || len(ids) != *out.Count || slices.ContainsFunc(ids, func(t int) bool { return t < 0 }) {
		ids = nil
	}
	return TokenCount{Count: *out.Count, MaxModelLen: out.MaxModelLen, IDs: ids}, nil
}

// CacheConfig is vLLM's cache_config_info gauge: the KV cache the engine
// allocated at start-up.
type CacheConfig struct {
	BlockSize    int
	NumGPUBlocks int
}

// KVTokens is the KV cache size in tokens.
func (c CacheConfig) KVTokens() int { return c.BlockSize * c.NumGPUBlocks }

// CacheConfig scrapes /metrics for vllm:cache_config_info; ok is false
// when the engine does not export it (or exports it without sizes).
func (c *Client) CacheConfig(ctx context.Context) (cfg CacheConfig, ok bool, e error) {
	b, e := c.get(ctx, "/metrics", 32<<20)
	if e != nil {
		return CacheConfig{}, false, e
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return CacheConfig{}, false, invalid(fault.Health, fault.ClassInferenceStatus, "/metrics: not a Prometheus text exposition: %v", err)
	}
	f, found := fams["vllm:cache_config_info"]
	if !found || len(f.GetMetric()) == 0 {
		return CacheConfig{}, false, nil
	}
	for _, l := range f.GetMetric()[0].GetLabel() {
		n, err := strconv.Atoi(l.GetValue())
		if err != nil {
			continue
		}
		switch l.GetName() {
		case "block_size":
			cfg.BlockSize = n
		case "num_gpu_blocks":
			cfg.NumGPUBlocks = n
		}
	}
	return cfg, cfg.BlockSize > 0 && cfg.NumGPUBlocks > 0, nil
}
