package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// plan is the sweep fitted to this engine: lengths that fit its context,
// concurrency inside the limits, cells that fit its KV cache.
type plan struct {
	prefill  []int
	decode   []int
	conc     []int
	cells    [][2]int // (input length, concurrency)
	prefixes []int
	suffixes []int
}

// prepare reads max_model_len and the cache config, then plans.
func (m *meter) prepare(ctx context.Context) error {
	tc, e := m.t.Client.TokenizeText(ctx, m.t.Model, "narwhal")
	if e != nil {
		return fmt.Errorf("/tokenize: %s (the profiler builds exactly tokenised prompts through it)", fault.Detail(e))
	}
	if tc.MaxModelLen <= 0 {
		return fmt.Errorf("/tokenize did not report max_model_len; the sweep cannot keep prompts inside the context")
	}
	m.s.MaxModelLen = tc.MaxModelLen
	m.prompts = &prompter{c: m.t.Client, model: m.t.Model, maxLen: tc.MaxModelLen}
	if cc, ok, e := m.t.Client.CacheConfig(ctx); e == nil && ok {
		m.s.KVCapacityTokens, m.s.BlockSize = cc.KVTokens(), cc.BlockSize
	}
	p, err := m.cfg.plan(tc.MaxModelLen, m.s.KVCapacityTokens)
	if err != nil {
		return err
	}
	m.plan = p
	m.s.SkippedCells = append(m.s.SkippedCells, p.skipped(m.cfg, m.s.KVCapacityTokens)...)
	return nil
}

func (c Config) plan(maxLen, kv int) (plan, error) {
	var p plan
	// Lengths past the context are replaced by the longest prompt that
	// fits (deviation, as for decode lengths below): the measured domain
	// then reaches max_model_len.
	p.prefill = keep(capAt(c.PrefillLengths, maxLen-1), func(n int) bool { return n > 0 })
	if len(p.prefill) < 3 {
		return p, fmt.Errorf("only %d prefill length(s) fit max_model_len %d (need ≥ 3; adjust --prefill-lengths)", len(p.prefill), maxLen)
	}
	// Like concurrency above --limits, a decode length the context cannot
	// hold is replaced by the longest that fits (a documented deviation:
	// the reference drops it), so the default sweep works on short contexts.
	p.decode = keep(capAt(c.DecodeLengths, maxLen-max(64, c.DecodeTokens)), func(n int) bool { return n > 0 })
	if len(p.decode) < 2 {
		return p, fmt.Errorf("only %d decode length(s) leave %d output tokens inside max_model_len %d (need ≥ 2; adjust --decode-lengths)",
			len(p.decode), max(64, c.DecodeTokens), maxLen)
	}
	p.conc = keep(capAt(c.Concurrency, c.MaxNumSeqs), func(n int) bool { return n > 0 })
	if len(p.conc) < 2 {
		return p, fmt.Errorf("only %d concurrency level(s) inside the limits (need ≥ 2; adjust --concurrency or --limits)", len(p.conc))
	}
	for _, l := range p.decode {
		for _, q := range p.conc {
			if kv <= 0 || q*(l+2*c.DecodeTokens) <= kv {
				p.cells = append(p.cells, [2]int{l, q})
			}
		}
	}
	if c.Warm {
		p.prefixes = keep(c.WarmPrefixes, func(n int) bool { return n > 0 && n+2 <= maxLen })
		if len(p.prefixes) > 0 {
			p.suffixes = keep(c.WarmSuffixes, func(n int) bool { return n > 0 && slices.Max(p.prefixes)+n+1 <= maxLen })
		}
	}
	return p, nil
}

// skipped names the cells whose cohort cannot be resident in kv tokens.
func (p plan) skipped(c Config, kv int) []string {
	var out []string
	for _, l := range p.decode {
		for _, q := range p.conc {
			if kv > 0 && q*(l+2*c.DecodeTokens) > kv {
				out = append(out, fmt.Sprintf("%d×%d exceeds kv capacity %d", l, q, kv))
			}
		}
	}
	return out
}

// keep returns the distinct values of v that pass ok, ascending.
func keep(v []int, ok func(int) bool) []int {
	var out []int
	for _, n := range v {
		if ok(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// capAt replaces points above limit by limit (limit ≤ 0: no cap).
func capAt(v []int, limit int) []int {
	out := make([]int, len(v))
	for i, n := range v {
		out[i] = n
		if limit > 0 && n > limit {
			out[i] = limit
		}
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sweep: marshal %T: %v", v, err)) // only literals
	}
	return b
}
