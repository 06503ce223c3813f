package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/profile/fit"
)

// coldPrefill times every planned length --prefill-repeats times with a
// one-token completion and fits the curve on the per-length medians.
func (m *meter) coldPrefill(ctx context.Context) (fit.Prefill, error) {
	total := len(m.plan.prefill) * m.cfg.PrefillRepeats
	done := 0
	m.progress(m.t.IID, PhasePrefill, 0, total)
	for _, n := range m.plan.prefill {
		var times []float64
		for rep := 0; rep < m.cfg.PrefillRepeats; rep++ {
			sec, cached, err := m.timedPrompt(ctx, m.lead("cold n=%d r=%d.", n, rep), n)
			if err != nil {
				return fit.Prefill{}, fmt.Errorf("cold prefill of %d tokens: %w", n, err)
			}
			m.s.Prefill = append(m.s.Prefill, PrefillSample{Tokens: n, Repeat: rep, Seconds: sec, CachedTokens: cached})
			if cached > 0 {
				return fit.Prefill{}, fmt.Errorf("the engine served %d of %d prompt tokens from its prefix cache during the cold prefill sweep; profile with prefix caching off or a cold cache (restart the engine)", cached, n)
			}
			times = append(times, sec)
			done++
			m.progress(m.t.IID, PhasePrefill, done, total)
		}
		m.s.PrefillMedians = append(m.s.PrefillMedians, fit.Point{Tokens: n, Seconds: fit.Median(times)})
	}
	f, err := fit.FitPrefill(m.s.PrefillMedians, m.s.BlockSize)
	if f.Errors != nil {
		m.s.PrefillFit = &f
	}
	if err != nil {
		return f, fmt.Errorf("%w (raw samples kept)", err)
	}
	return f, nil
}

// timedPrompt builds an exactly n-token prompt and times its one-token
// completion; it returns the seconds and the tokens reported cached.
func (m *meter) timedPrompt(ctx context.Context, lead string, n int) (float64, int, error) {
	text, err := m.prompts.build(ctx, lead, n)
	if err != nil {
		return 0, 0, err
	}
	return m.timedText(ctx, text, n)
}

func (m *meter) timedText(ctx context.Context, text string, n int) (float64, int, error) {
	c, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	out, e := m.t.Client.Complete(c, completionBody(m.t.Model, text))
	sec := secondsSince(start)
	if e != nil {
		return 0, 0, fmt.Errorf("completion: %s", fault.Detail(e))
	}
	if out.PromptTokens != 0 && out.PromptTokens != n {
		return 0, 0, fmt.Errorf("the engine counted %d prompt tokens, /tokenize %d (tokenizer mismatch)", out.PromptTokens, n)
	}
	return sec, out.CachedTokens, nil
}
