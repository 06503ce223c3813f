package sim

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/sched"
)

// driver is how the simulator steps the core: every core step the runner
// takes goes through one of its methods, and Replay drives the same
// methods from a recorded log. The steps are the router's own (the core's
// compound steps, sched.Core.Place and PlaceDecode); what the simulator
// fixes is their arguments: it never excludes an engine and every
// placement is a request's first, because it models no engine failures
// to retry or fail over from.
type driver struct{ core *sched.Core }

// arrive registers a sized arrival with its cache evidence (nil: cold)
// and returns the core's handle for it, which tokens takes.
func (d driver) arrive(now float64, rid string, in, out int, cached map[string]int) *sched.Request {
	return d.core.Track(now, sched.Request{RID: rid, InputLen: in, WantedLen: out, CachedTokens: cached})
}

// place is a request's prefill step.
func (d driver) place(now float64, rid string) (sched.Placement, *sched.Refusal) {
	return d.core.Place(now, rid, nil, sched.First)
}

// prefilled is the producer's completion.
func (d driver) prefilled(now float64, iid, rid string) { d.core.PrefillDone(now, iid, rid) }

// placeDecode is a request's decode step.
func (d driver) placeDecode(now float64, rid string) (sched.Placement, *sched.Refusal) {
	return d.core.PlaceDecode(now, rid, nil)
}

// tokens is n output tokens of the request arrive returned r for: the step
// per token, so it skips the core's lookup by rid.
func (d driver) tokens(now float64, iid string, r *sched.Request, n int) {
	d.core.OutputTokensOf(now, iid, r, n)
}

// oneTokenEach is one output token of each of rs, the handles arrive
// returned, on engine i: a decode step's tokens, in the step's order.
func (d driver) oneTokenEach(now float64, i *sched.Instance, rs []*sched.Request) {
	d.core.OneTokenEach(now, i, rs)
}

func (d driver) finish(now float64, rid string) { d.core.Finished(now, rid) }

func (d driver) tick(now float64) []sched.Decision { return d.core.Tick(now) }

// setLive is the availability core's verdict on an engine: out of
// placement (an ejection, a drain) or back (a readmission). The router's
// supervisor publishes it; the simulator takes it for a drained engine
// (Spec.Drains).
func (d driver) setLive(iid string, live bool) { d.core.SetLive(iid, live) }

// Replay feeds log, the steps another driver (the router) took, through
// the simulator's driver into core, a core built from the same fleet and
// profiles, and returns the steps core recorded this time. The core is
// deterministic, so the two logs are equal exactly when the simulator
// takes the same steps with the same arguments and gets the same answers.
// A step the simulator never takes (an engine's role restored from a
// handoff, its probation or its profile changing) is an error.
func Replay(core *sched.Core, log []sched.Step) ([]sched.Step, error) {
	var got []sched.Step
	core.Record(func(s sched.Step) { got = append(got, s) })
	defer core.Record(nil)
	d := driver{core}
	tracked := map[string]*sched.Request{} // each rid's handle, as the runner keeps it
	for k, s := range log {
		if err := d.replay(s, tracked); err != nil {
			return got, fmt.Errorf("sim: replaying step %d (%s at %gs): %w", k, s.Kind, s.Now, err)
		}
	}
	return got, nil
}

// replay takes one recorded step through the driver method the runner
// uses for it; tracked holds the handles arrive returned.
func (d driver) replay(s sched.Step, tracked map[string]*sched.Request) error {
	switch s.Kind {
	case sched.StepTrack:
		tracked[s.RID] = d.arrive(s.Now, s.RID, s.InputLen, s.WantedLen, sched.CachedMap(s.Cached))
	case sched.StepPlace:
		d.place(s.Now, s.RID)
	case sched.StepPrefillDone:
		d.prefilled(s.Now, s.IID, s.RID)
	case sched.StepPlaceDecode:
		d.placeDecode(s.Now, s.RID)
	case sched.StepOutputTokens:
		if r := tracked[s.RID]; r != nil {
			d.tokens(s.Now, s.IID, r, s.Tokens)
		} else { // a log that starts after the request's Track: the step by rid
			d.core.OutputTokens(s.Now, s.IID, s.RID, s.Tokens)
		}
	case sched.StepFinished:
		d.finish(s.Now, s.RID)
	case sched.StepTick:
		d.tick(s.Now)
	case sched.StepCacheEvidence:
		d.core.SetCacheEvidence(s.RID, sched.CachedMap(s.Cached))
	case sched.StepSetLive:
		d.setLive(s.IID, s.On)
	default:
		return fmt.Errorf("the simulator takes no %s step: it models no role handoffs, drift probation or profile reloads", s.Kind)
	}
	return nil
}
