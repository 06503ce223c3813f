package sweep

import (
	"context"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/profile/fit"
)

// warm measures cached prefix × uncached suffix cases: it warms each
// case's prefix, times prefix+suffix, reads how much the engine served
// from cache, and times a cold control of the same total length.
func (m *meter) warm(ctx context.Context, cold fit.Prefill) (*fit.Warm, error) {
	total := len(m.plan.prefixes) * len(m.plan.suffixes) * m.cfg.PrefillRepeats
	done := 0
	m.progress(m.t.IID, PhaseWarm, 0, total)
	for _, p := range m.plan.prefixes {
		for _, s := range m.plan.suffixes {
			var times []float64
			var hit int
			for rep := 0; rep < m.cfg.PrefillRepeats; rep++ {
				ws, err := m.warmCase(ctx, p, s, rep)
				if err != nil {
					return nil, fmt.Errorf("warm prefill %d+%d: %w", p, s, err)
				}
				m.s.Warm = append(m.s.Warm, ws)
				times, hit = append(times, ws.Seconds), ws.Prefix
				done++
				m.progress(m.t.IID, PhaseWarm, done, total)
			}
			m.s.WarmCases = append(m.s.WarmCases, fit.WarmCase{Prefix: hit, Suffix: p + s - hit, Seconds: fit.Median(times)})
		}
	}
	w, err := fit.FitWarm(m.s.WarmCases, cold.BlockTokens, cold.Split)
	if err != nil {
		return nil, fmt.Errorf("%w (raw samples kept)", err)
	}
	m.s.WarmFit = &w
	return &w, nil
}

func (m *meter) warmCase(ctx context.Context, p, s, rep int) (WarmSample, error) {
	lead := m.lead("warm p=%d s=%d r=%d.", p, s, rep)
	prefix, err := m.prompts.build(ctx, lead, p)
	if err != nil {
		return WarmSample{}, err
	}
	if _, _, err := m.timedText(ctx, prefix, p); err != nil {
		return WarmSample{}, fmt.Errorf("warming the prefix: %w", err)
	}
	full, err := m.prompts.extend(ctx, prefix, p+s)
	if err != nil {
		return WarmSample{}, err
	}
	sec, cached, err := m.timedText(ctx, full, p+s)
	if err != nil {
		return WarmSample{}, err
	}
	if cached == 0 {
		return WarmSample{}, fmt.Errorf("the engine reported no cached tokens for a prefix it had just computed; --warm needs prefix caching on and reported (vllm serve --enable-prefix-caching --enable-prompt-tokens-details)")
	}
	coldSec, _, err := m.timedPrompt(ctx, m.lead("warm-control p=%d s=%d r=%d.", p, s, rep), p+s)
	if err != nil {
		return WarmSample{}, fmt.Errorf("cold control: %w", err)
	}
	return WarmSample{Prefix: cached, Suffix: p + s - cached, Repeat: rep, Seconds: sec, ColdSeconds: coldSec}, nil
}
