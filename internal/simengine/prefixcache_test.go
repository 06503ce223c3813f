package simengine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// usageOf completes prompt and returns its usage: cached is nil when
// prompt_tokens_details is null (the engine does not report it).
func usageOf(t *testing.T, e *Engine, prompt any, maxTokens int) (promptTokens int, cached *int, body []byte) {
	t.Helper()
	resp, body := post(t, e.URL()+"/v1/completions", map[string]any{"model": "sim-model", "prompt": prompt, "max_tokens": maxTokens})
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if out.Usage.Details == nil {
		return out.Usage.PromptTokens, nil, body
	}
	return out.Usage.PromptTokens, &out.Usage.Details.Cached, body
}

func completionUsage(t *testing.T, e *Engine, prompt any) (promptTokens, cached int) {
	t.Helper()
	n, c, body := usageOf(t, e, prompt, 2)
	if c == nil {
		t.Fatalf("usage without prompt_tokens_details: %s", body)
	}
	return n, *c
}

func TestPrefixCacheHitsAndReportsCachedTokens(t *testing.T) {
	e := startEngine(t, func(c *Config) {
		c.Prefix = PrefixCache{Enabled: true, PromptTokensDetails: true}
	})
	system := strings.Repeat("You are a careful assistant. ", 20)
	n1, c1 := completionUsage(t, e, system+"First question?")
	if c1 != 0 {
		t.Fatalf("cold prompt reported %d cached tokens", c1)
	}
	n2, c2 := completionUsage(t, e, system+"Another, longer question entirely?")
	shared := len(Tokenize(system))
	if want := shared / 16 * 16; c2 != want {
		t.Errorf("second prompt (%d tokens, %d shared) cached %d tokens, want the shared whole blocks %d", n2, shared, c2, want)
	}
	_, c3 := completionUsage(t, e, system+"First question?")
	if want := (n1 - 1) / 16 * 16; c3 != want {
		t.Errorf("repeated prompt of %d tokens cached %d, want %d (never the last token)", n1, c3, want)
	}
	e.ResetPrefixCache()
	if _, c := completionUsage(t, e, system+"First question?"); c != 0 {
		t.Errorf("after a reset the prompt cached %d tokens", c)
	}
}

func TestPrefixCacheEvictsLRUWithinKVCapacity(t *testing.T) {
	e := startEngine(t, func(c *Config) {
		c.KVCapacityTokens, c.MaxModelLen = 64*16, 1024 // 64 blocks
		c.Prefix = PrefixCache{Enabled: true, PromptTokensDetails: true}
	})
	ids := func(from, n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	a, b := ids(1, 40*16), ids(5000, 45*16)
	if _, c := completionUsage(t, e, a); c != 0 || e.CachedBlocks() != 40 {
		t.Fatalf("a: cached %d, %d blocks resident, want 0 and 40", c, e.CachedBlocks())
	}
	completionUsage(t, e, b) // 40 + 45 blocks do not fit 64: a's least recently used blocks go
	if n := e.CachedBlocks(); n > 64 || n < 45 {
		t.Fatalf("cache holds %d blocks, want b's 45 and at most the engine's 64", n)
	}
	if _, c := completionUsage(t, e, a); c != 0 {
		t.Errorf("a's first block survived b (cached %d): LRU evicts the oldest blocks first", c)
	}
}

type collect struct {
	mu     sync.Mutex
	begun  bool
	events []kvevents.Event
}

func (c *collect) Begin(bool) { c.mu.Lock(); c.begun = true; c.mu.Unlock() }
func (c *collect) Apply(_ int64, b kvevents.Batch) {
	c.mu.Lock()
	c.events = append(c.events, b.Events...)
	c.mu.Unlock()
}
func (c *collect) Gap(int64, int64) {}

func TestPrefixCachePublishesKVEvents(t *testing.T) {
	e := startEngine(t, func(c *Config) {
		c.Prefix = PrefixCache{Enabled: true, KVEvents: &kvevents.Config{Enable: true,
			Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}}
	})
	prompt := strings.Repeat("one two three four ", 10)
	resp, body := post(t, e.URL()+"/v1/completions", map[string]any{"model": "sim-model", "prompt": prompt, "max_tokens": 1})
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	e.ResetPrefixCache()
	pub, rep := e.KVEventEndpoints()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collect{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = kvevents.Subscriber{Endpoint: pub, ReplayEndpoint: rep, Timeout: 2 * time.Second}.Run(ctx, c)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.events)
		c.mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) != 2 || c.events[0].Kind != kvevents.KindStored || c.events[1].Kind != kvevents.KindCleared {
		t.Fatalf("replayed events %+v, want BlockStored then AllBlocksCleared", c.events)
	}
	toks := Tokenize(prompt)
	ints := make([]int, len(toks))
	for i, v := range toks {
		ints[i] = int(v)
	}
	h, _ := kvevents.NewHasher(kvevents.SHA256, 16, "0")
	want := h.Externals(ints)
	got := c.events[0].Hashes
	if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || c.events[0].Parent != nil {
		t.Errorf("BlockStored hashes %v parent %v, want %v and no parent", got, c.events[0].Parent, want)
	}
}

// cachedTokens is a completion's cached_tokens, 0 when not reported.
func cachedTokens(t *testing.T, e *Engine, prompt string) int {
	t.Helper()
	_, c, _ := usageOf(t, e, prompt, 1)
	if c == nil {
		return 0
	}
	return *c
}

func TestPrefixCaching(t *testing.T) {
	prefix := "lead." + strings.Repeat(" the", 99) // 101 tokens ("lead" "." and 99 fillers): 6 full blocks of 16
	full := prefix + strings.Repeat(" cat", 50)
	off := startEngine(t, nil)
	cachedTokens(t, off, prefix)
	if n := cachedTokens(t, off, full); n != 0 {
		t.Fatalf("prefix caching off reported %d cached tokens", n)
	}
	on := startEngine(t, func(c *Config) { c.Prefix = PrefixCache{Enabled: true, PromptTokensDetails: true} })
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
