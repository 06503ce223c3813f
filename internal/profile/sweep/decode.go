package sweep

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/profile/fit"
)

// decode runs one cohort per planned cell and fits the decode plane.
func (m *meter) decode(ctx context.Context) (fit.Decode, error) {
	m.progress(m.t.IID, PhaseDecode, 0, len(m.plan.cells))
	for i, cell := range m.plan.cells {
		samples, err := m.cell(ctx, cell[0], cell[1])
		if err != nil {
			return fit.Decode{}, fmt.Errorf("decode cell %d input tokens × %d streams: %w", cell[0], cell[1], err)
		}
		m.s.Decode = append(m.s.Decode, samples...)
		m.s.DecodeCells = append(m.s.DecodeCells, cellMedian(cell[0], cell[1], samples))
		m.progress(m.t.IID, PhaseDecode, i+1, len(m.plan.cells))
	}
	lim := fit.Limits{MaxFitMAPE: m.cfg.Limits.MaxDecodeFitMAPE, MaxCVMAPE: m.cfg.Limits.MaxDecodeCVMAPE}
	d, err := fit.FitDecode(m.s.DecodeCells, lim)
	if d.Errors != nil {
		m.s.DecodeFit = &d
	}
	if err != nil {
		return d, fmt.Errorf("%w (raw samples kept)", err)
	}
	return d, nil
}

// cell measures one cohort, and once more with twice the tokens when the
// cohort was never resident at once (the first stream finished before
// the last one got its first token).
func (m *meter) cell(ctx context.Context, input, q int) ([]DecodeSample, error) {
	tokens := m.cfg.DecodeTokens
	for attempt := 0; attempt < 2; attempt++ {
		streams, err := m.cohort(ctx, input, q, tokens, attempt)
		if err != nil {
			return nil, err
		}
		if s := residentIntervals(input, streams); len(s) > 0 {
			return s, nil
		}
		tokens = min(2*tokens, m.s.MaxModelLen-input-1)
	}
	return nil, fmt.Errorf("the cohort was never resident at once, even with %d tokens per stream (raise --decode-tokens)", tokens)
}

// arrivals is one stream's token arrival times (one entry per token).
type arrivals []time.Time

// cohort opens q streams of exactly tokens tokens on input-token prompts
// at once and records when each token arrived.
func (m *meter) cohort(ctx context.Context, input, q, tokens, attempt int) ([]arrivals, error) {
	prompts := make([]string, q)
	for i := range prompts {
		var err error
		lead := m.lead("decode n=%d q=%d i=%d a=%d.", input, q, i, attempt)
		if prompts[i], err = m.prompts.build(ctx, lead, input); err != nil {
			return nil, err
		}
	}
	c, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	out := make([]arrivals, q)
	errs := make([]error, q)
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = m.stream(c, prompts[i], tokens)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stream reads one decode stream to [DONE], stamping each token.
func (m *meter) stream(ctx context.Context, prompt string, tokens int) (arrivals, error) {
	s, e := m.t.Client.OpenStream(ctx, "/v1/completions", streamBody(m.t.Model, prompt, tokens), "")
	if e != nil {
		return nil, fmt.Errorf("stream: %s", fault.Detail(e))
	}
	defer s.Close()
	var got arrivals
	for {
		ev, e := s.Next()
		if e != nil {
			return nil, fmt.Errorf("stream: %s", fault.Detail(e))
		}
		if ev.Done {
			break
		}
		now := time.Now()
		n := ev.Tokens
		if n == 0 && ev.Output {
			n = 1
		}
		for range n {
			got = append(got, now)
		}
	}
	if len(got) < tokens {
		return nil, fmt.Errorf("stream ended after %d of %d tokens (the engine must honour ignore_eos and min_tokens)", len(got), tokens)
	}
	return got, nil
}

// residentIntervals keeps the gaps that lie wholly between the last
// stream's first token and the first stream's last token, each with the
// KV tokens the cohort held then: Σ (input + tokens received so far).
func residentIntervals(input int, streams []arrivals) []DecodeSample {
	var from, to time.Time
	for i, a := range streams {
		if i == 0 || a[0].After(from) {
			from = a[0]
		}
		if last := a[len(a)-1]; i == 0 || last.Before(to) {
			to = last
		}
	}
	var out []DecodeSample
	for _, a := range streams {
		for j := 1; j < len(a); j++ {
			if a[j-1].Before(from) || a[j].After(to) || !a[j].After(a[j-1]) {
				continue
			}
			out = append(out, DecodeSample{InputTokens: input, Requests: len(streams),
				ResidentKV: residentAt(input, streams, a[j]), Seconds: a[j].Sub(a[j-1]).Seconds()})
		}
	}
	return out
}

// residentAt is the cohort's KV tokens just before t.
func residentAt(input int, streams []arrivals, t time.Time) int {
	k := 0
	for _, a := range streams {
		k += input + sort.Search(len(a), func(i int) bool { return !a[i].Before(t) })
	}
	return k
}

func cellMedian(input, q int, samples []DecodeSample) fit.Cell {
	secs := make([]float64, len(samples))
	kv := make([]float64, len(samples))
	for i, s := range samples {
		secs[i], kv[i] = s.Seconds, float64(s.ResidentKV)
	}
	return fit.Cell{InputTokens: input, Requests: q, ResidentKV: int(fit.Median(kv)), Seconds: fit.Median(secs), Samples: len(samples)}
}
