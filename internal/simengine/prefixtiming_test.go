package simengine

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/units"
)

// firstTokenAfter streams prompt and returns how long its first token took
// on the fake clock.
func firstTokenAfter(t *testing.T, e *Engine, clk *ports.Fake, prompt string) time.Duration {
	t.Helper()
	start := clk.Now()
	got := make(chan time.Duration, 1)
	go func() {
		resp, err := client.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(
			`{"model":"sim-model","prompt":"`+prompt+`","max_tokens":1,"stream":true}`))
		if err != nil {
			got <- -1
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sent := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: {") && !sent {
				got <- clk.Now().Sub(start)
				sent = true
			}
		}
	}()
	waitFor(t, func() bool { _, ok := clk.NextDeadline(); return ok })
	at, _ := clk.NextDeadline()
	clk.Set(at)
	select {
	case d := <-got:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no first token")
	}
	return 0
}

// A prompt whose prefix is cached is prefilled in the profile's
// cached_prefill_time(P, S), to the nanosecond.
func TestWarmPrefillFollowsTheCachedFit(t *testing.T) {
	clk := ports.NewFake(time.Unix(1_700_000_000, 0))
	prof := WarmProfile("sim-0")
	e := startEngine(t, func(c *Config) { c.Clock = clk; c.Profile = prof; c.Prefix = PrefixCache{Enabled: true} })
	base := strings.TrimSpace(strings.Repeat("word ", 600)) // no trailing space: its tokens prefix the longer prompt's
	n := CountTokens(base)
	if d := firstTokenAfter(t, e, clk, base); d != units.Seconds(prof.PrefillTime(n)) {
		t.Fatalf("cold prefill took %v, want prefill_time(%d) = %v", d, n, units.Seconds(prof.PrefillTime(n)))
	}
	longer := base + strings.Repeat(" more", 100)
	m := CountTokens(longer)
	p := min(n/16, (m-1)/16) * 16 // the first prompt's whole blocks, short of the last prompt token
	warm, ok := prof.CachedPrefillTime(p, m-p)
	if !ok {
		t.Fatal("the warm fit does not cover the case")
	}
	if d := firstTokenAfter(t, e, clk, longer); d != units.Seconds(warm) {
		t.Errorf("warm prefill took %v, want cached_prefill_time(%d, %d) = %v (cold would be %v)", d, p, m-p,
			units.Seconds(warm), units.Seconds(prof.PrefillTime(m)))
	}
}
