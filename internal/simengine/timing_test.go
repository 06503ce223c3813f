package simengine

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/units"
)

// TestTimingFollowsProfile measures TTFT and every token interval of a
// stream under a fake clock and compares them with the profile's curves
// exactly (to the nanosecond rounding of one step).
func TestTimingFollowsProfile(t *testing.T) {
	clk := ports.NewFake(time.Unix(1_700_000_000, 0))
	prof := DefaultProfile("sim-0")
	e := startEngine(t, func(c *Config) { c.Clock = clk; c.Profile = prof })
	prompt := strings.Repeat("word ", 900)
	n := CountTokens(prompt)
	const maxTokens = 6
	start := clk.Now()

	type tok struct {
		at  time.Time
		err error
	}
	toks := make(chan tok, maxTokens+4)
	go func() {
		defer close(toks)
		resp, err := client.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(
			`{"model":"sim-model","prompt":"`+prompt+`","max_tokens":6,"stream":true}`))
		if err != nil {
			toks <- tok{err: err}
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: {") {
				toks <- tok{at: clk.Now()}
			}
		}
	}()

	want := []time.Duration{units.Seconds(prof.PrefillTime(n))}
	for k := 1; k < maxTokens; k++ {
		want = append(want, want[k-1]+units.Seconds(prof.TokenInterval(n+k-1, 1)))
	}
	for k := 0; k < maxTokens; k++ {
		waitFor(t, func() bool { _, ok := clk.NextDeadline(); return ok })
		at, _ := clk.NextDeadline()
		clk.Set(at)
		select {
		case tk, ok := <-toks:
			if !ok || tk.err != nil {
				t.Fatalf("token %d: stream ended (%v)", k, tk.err)
			}
			if got := tk.at.Sub(start); got != want[k] {
				t.Errorf("token %d at %v, want %v", k, got, want[k])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("token %d never arrived", k)
		}
	}
	for range toks { // drain the usage-less end of stream
	}
}

func TestLatencyMultiplierAndStall(t *testing.T) {
	cases := []struct {
		name   string
		faults Faults
		want   func(prefill time.Duration) time.Duration
	}{
		{"none", Faults{}, func(p time.Duration) time.Duration { return p }},
		{"x3", Faults{LatencyMultiplier: 3}, func(p time.Duration) time.Duration { return time.Duration(float64(p) * 3) }},
		{"stall 7s", Faults{StallSeconds: 7}, func(p time.Duration) time.Duration { return p + 7*time.Second }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := ports.NewFake(time.Unix(1_700_000_000, 0))
			prof := DefaultProfile("sim-0")
			e := startEngine(t, func(cf *Config) { cf.Clock = clk; cf.Profile = prof; cf.Faults = c.faults })
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := client.Post(e.URL()+"/v1/completions", "application/json", strings.NewReader(`{"model":"sim-model","prompt":"hello there","max_tokens":1}`))
				if err == nil {
					resp.Body.Close()
				}
			}()
			waitFor(t, func() bool { _, ok := clk.NextDeadline(); return ok })
			at, _ := clk.NextDeadline()
			if got, want := at.Sub(clk.Now()), c.want(units.Seconds(prof.PrefillTime(CountTokens("hello there")))); got != want {
				t.Errorf("first step lasts %v, want %v", got, want)
			}
			clk.Set(at)
			<-done
		})
	}
}

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
