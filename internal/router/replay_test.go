package router

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
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

	core, replayed := replayThroughSim(t, h, recorded)
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

// An ejection and a readmission replay too: a decode engine restarted
// between requests is excluded as a new process, serving goes on without
// it, and it comes back validated. The core's steps, the two liveness
// changes among them, replay through the simulator's driver; the
// lifecycle core's Steps and Readys (identity checks, the ejection, the
// readmission probe's outcome) replay into a fresh lifecycle manager
// answer for answer.
func TestRouterAvailabilityReplays(t *testing.T) {
	var steps []sched.Step     // under the router's mu
	var life []lifecycle.Entry // under avail's lock
	h := startHarness(t, ppdd, harnessOptions{mod: fastRecovery, built: func(r *Router) {
		r.core.Record(func(s sched.Step) { steps = append(steps, s) })
		r.av.Record(func(e lifecycle.Entry) { life = append(life, e) })
	}})
	complete := func(n int) {
		for k := range n {
			if resp, body := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("turn ", k), "max_tokens": 3}); resp.StatusCode != 200 {
				t.Fatalf("completion %d: %d %s", k, resp.StatusCode, body)
			}
		}
	}
	complete(3)
	h.engines.Engines[3].Restart() // d1, with nothing in flight: no leg fails, none is retried
	eventually(t, "d1 excluded as a new process", func() bool { return h.router.life.Ejected()["d1"] == "process_identity" })
	complete(3)
	eventually(t, "d1 back in service", func() bool { return !h.ejected("d1") })
	complete(3)
	h.router.av.Record(nil)
	h.router.mu.Lock()
	h.router.core.Record(nil)
	recorded := append([]sched.Step(nil), steps...)
	h.router.mu.Unlock()

	checkLiveness(t, recorded, "d1")
	_, replayed := replayThroughSim(t, h, recorded)
	if !reflect.DeepEqual(replayed, recorded) {
		t.Fatalf("the simulator's driver took %d steps, the router %d, not all equal", len(replayed), len(recorded))
	}
	checkEjectedAndBack(t, life, "d1")
	if err := lifecycle.Replay(lifecycle.New(h.cfg), life); err != nil {
		t.Fatal(err)
	}
}

// replayThroughSim feeds the router's recorded core steps through the
// simulator's driver into a fresh core built from the same fleet and
// profiles; it returns that core and the steps it took.
func replayThroughSim(t *testing.T, h *harness, recorded []sched.Step) (*sched.Core, []sched.Step) {
	t.Helper()
	core, err := sched.New(h.cfg, h.store)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := sim.Replay(core, recorded)
	if err != nil {
		t.Fatal(err)
	}
	return core, replayed
}

// checkLiveness fails a log without iid leaving placement and coming back.
func checkLiveness(t *testing.T, log []sched.Step, iid string) {
	t.Helper()
	var got []bool
	for _, s := range log {
		if s.Kind == sched.StepSetLive && s.IID == iid {
			got = append(got, s.On)
		}
	}
	if !reflect.DeepEqual(got, []bool{false, true}) {
		t.Fatalf("%s's liveness steps %v, want out then back", iid, got)
	}
}

// checkEjectedAndBack fails a lifecycle log in which iid was not ejected
// and then recovered.
func checkEjectedAndBack(t *testing.T, log []lifecycle.Entry, iid string) {
	t.Helper()
	ejected := false
	for _, e := range log {
		switch in := e.Input.(type) {
		case lifecycle.Ejection:
			ejected = ejected || in.IID == iid && e.Answer.Changed
		case lifecycle.Recover:
			if ejected && in.IID == iid && e.Answer.Changed {
				t.Logf("%d lifecycle entries", len(log))
				return
			}
		}
	}
	t.Fatalf("the lifecycle log (%d entries) has no ejection of %s followed by its recovery", len(log), iid)
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
