package simengine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func cachedTokens(t *testing.T, e *Engine, prompt string) int {
	t.Helper()
	_, b := post(t, e.URL()+"/v1/completions", map[string]any{"model": "sim-model", "prompt": prompt, "max_tokens": 1})
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if out.Usage.Details == nil {
		return 0
	}
	return out.Usage.Details.Cached
}

func TestPrefixCaching(t *testing.T) {
	prefix := "lead." + strings.Repeat(" the", 99) // 101 tokens ("lead" "." and 99 fillers): 6 full blocks of 16
	full := prefix + strings.Repeat(" cat", 50)
	off := startEngine(t, nil)
	cachedTokens(t, off, prefix)
	if n := cachedTokens(t, off, full); n != 0 {
		t.Fatalf("prefix caching off reported %d cached tokens", n)
	}
	on := startEngine(t, func(c *Config) { c.PrefixCaching = true })
	if n := cachedTokens(t, on, prefix); n != 0 {
		t.Fatalf("a cold cache reported %d cached tokens", n)
	}
	if n := cachedTokens(t, on, full); n != 96 {
		t.Fatalf("warm prefix: %d cached tokens, want 96 (the 6 full blocks of the 101-token prefix)", n)
	}
	if n := cachedTokens(t, on, full); n != 144 {
		t.Fatalf("the same prompt again: %d cached, want 144 (every full block but the last token's)", n)
	}
	on.Restart()
	if n := cachedTokens(t, on, full); n != 0 {
		t.Fatalf("a restart must empty the cache, got %d cached", n)
	}
}

func TestJitterFault(t *testing.T) {
	e := startEngine(t, nil)
	if err := e.SetFaults(Faults{JitterFraction: 1}); err == nil {
		t.Fatal("jitter_fraction 1 accepted")
	}
	if err := e.SetFaults(Faults{JitterFraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	e.mu.Lock()
	for range 20 {
		d := e.jitterLocked(10*time.Millisecond, 0.5)
		if d < 5*time.Millisecond || d > 15*time.Millisecond {
			t.Errorf("jittered step %v outside ±50%% of 10ms", d)
		}
		seen[d] = true
	}
	e.mu.Unlock()
	if len(seen) < 10 {
		t.Fatalf("jitter produced only %d distinct durations", len(seen))
	}
}
