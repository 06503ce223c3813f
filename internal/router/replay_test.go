package router

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/sim"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// The router and the simulator drive the scheduling core through the same
// steps. Every step the router's core took while serving mixed traffic
// (placements, a refusal, handoffs, tokens, finishes, control passes) is
// fed through the simulator's driver into a fresh core: the log that core
// records, arguments and answers included, must equal the router's, and
// the two cores must end in the same state.
func TestRouterStepsReplayThroughTheSimulator(t *testing.T) {
	var log []sched.Step // appended inside core steps, which run under the router's mu
	h := startHarness(t, ppdd, harnessOptions{
		// A TTFT target of 1 s keeps the sizing-saturation threshold
		// (TTFT/4) above a loaded race-detector run's loop lag, so the
		// one refusal is the core's own.
		mod:    func(c *fleet.Config) { c.SLO.TTFT, c.Controller.MonitorIntervalS = 1, 0.1 },
		engine: func(c *simengine.Config) { c.MaxModelLen = 16384 }, // room for a prompt priced over 1 s
		built: func(r *Router) {
			r.core.Record(func(s sched.Step) { log = append(log, s) })
		},
	})
	serveMixedTraffic(t, h)
	h.router.mu.Lock()
	recorded := append([]sched.Step(nil), log...)
	h.router.core.Record(nil)
	end := recorded[len(recorded)-1].Now
	wantControl, wantSnap := h.router.core.Control(), h.router.core.Snapshot(end)
	h.router.mu.Unlock()
	checkStepMix(t, recorded)

	core, err := sched.New(h.cfg, h.store)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := sim.Replay(core, recorded)
	if err != nil {
		t.Fatal(err)
	}
	for k := range min(len(recorded), len(replayed)) {
		if !reflect.DeepEqual(recorded[k], replayed[k]) {
			t.Fatalf("step %d: the router took\n  %+v\nthe simulator's driver took\n  %+v", k, recorded[k], replayed[k])
		}
	}
	if len(recorded) != len(replayed) {
		t.Fatalf("the router took %d steps, the simulator's driver %d", len(recorded), len(replayed))
	}
	if got := core.Control(); !reflect.DeepEqual(got, wantControl) {
		t.Errorf("controller state after replay\n  %+v\nwant the router's\n  %+v", got, wantControl)
	}
	if got := core.Snapshot(end); !reflect.DeepEqual(got, wantSnap) {
		t.Errorf("core snapshot after replay\n  %+v\nwant the router's\n  %+v", got, wantSnap)
	}
}

// serveMixedTraffic sends concurrent completions of several sizes, and one
// prompt that alone cannot meet the TTFT target.
func serveMixedTraffic(t *testing.T, h *harness) {
	var wg sync.WaitGroup
	for k := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := map[string]any{"prompt": strings.Repeat(fmt.Sprintf("word%d ", k), 20+60*k), "max_tokens": 2 + k}
			h.post(ctx(t), "/v1/completions", body)
		}()
	}
	wg.Wait()
	resp, body := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": promptPricedAt(1.6), "max_tokens": 2})
	if resp.StatusCode != 400 {
		t.Fatalf("a prompt priced over the TTFT target: status %d, want 400: %s", resp.StatusCode, body)
	}
}

// checkStepMix fails a log that would make the replay say little: it must
// hold placed and refused prefill steps, decode steps, tokens and ticks.
func checkStepMix(t *testing.T, log []sched.Step) {
	t.Helper()
	n := map[string]int{}
	for _, s := range log {
		k := s.Kind.String()
		if s.Kind == sched.StepPlace && s.Refusal != nil {
			k = "refused"
		}
		n[k]++
	}
	for _, k := range []string{"track", "place", "refused", "place_decode", "prefill_done", "output_tokens", "finished", "tick"} {
		if n[k] == 0 {
			t.Fatalf("the router's log has no %s step: %v", k, n)
		}
	}
	t.Logf("steps: %v", n)
}
