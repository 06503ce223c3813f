package sched

import (
	"fmt"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// drive offers rate requests per second of (in, want) for seconds, each
// completed at once with its full output, ticking the controller every
// second. It returns every decision.
func drive(c *Core, from, seconds float64, rate int, in, want int) []Decision {
	var out []Decision
	n := 0
	for t := from; t < from+seconds; t++ {
		for j := 0; j < rate; j++ {
			id := fmt.Sprintf("r%.0f-%d", t, n)
			n++
			r := c.Track(t, req(id, in, want))
			r.OutputLen = want
			c.Finished(t, id)
		}
		out = append(out, c.Tick(t+0.5)...)
	}
	return out
}

// offer adds arrivals without ticking the controller.
func offer(c *Core, from, seconds float64, rate int, in, want int) {
	for t := from; t < from+seconds; t++ {
		for j := 0; j < rate; j++ {
			id := fmt.Sprintf("o%.0f-%d", t, j)
			r := c.Track(t, req(id, in, want))
			r.OutputLen = want
			c.Finished(t, id)
		}
	}
}

func roles(c *Core) (p, d int) {
	for _, i := range c.instances {
		if i.Role == fleet.Prefill {
			p++
		} else {
			d++
		}
	}
	return p, d
}

func applied(ds []Decision) []Decision {
	var out []Decision
	for _, d := range ds {
		if d.Applied {
			out = append(out, d)
		}
	}
	return out
}

func reactiveCore(t *testing.T, specs ...string) *Core {
	c := newCore(t, specs...)
	c.opt.Policy = PolicyReactive
	return c
}

func TestIdleFleetMakesNoDecisions(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode", "d1:decode")
	for s := 0.0; s < 3600; s++ {
		if ds := c.Tick(s); len(ds) != 0 {
			t.Fatalf("decision on an idle fleet at %v s: %+v", s, ds)
		}
	}
}

func TestPrefillHeavyDemandMovesTowardPrefillAndBack(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode", "d1:decode")
	ds := applied(drive(c, 0, 180, 20, 8000, 2))
	if p, _ := roles(c); p != 3 || len(ds) != 1 || ds[0].Flip.To != fleet.Prefill {
		t.Fatalf("after a prefill-heavy phase: %d prefill engines, moves %+v; want one move to 3P1D", p, ds)
	}
	if ds[0].At < c.opt.Controller.Reactive.EvidenceSpanS {
		t.Errorf("moved toward prefill at %v s, before the %v s evidence window closed", ds[0].At, c.opt.Controller.Reactive.EvidenceSpanS)
	}
	back := applied(drive(c, 180, 240, 6, 100, 512))
	if p, _ := roles(c); p > 2 || len(back) == 0 || back[0].Flip.To != fleet.Decode {
		t.Fatalf("after a decode-heavy phase: %d prefill engines, moves %+v; want moves back toward decode", p, back)
	}
}

func TestStationaryDemandDoesNotThrash(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode", "d1:decode", "d2:decode", "d3:decode")
	ds := applied(drive(c, 0, 3600, 10, 2000, 128))
	if len(ds) > 4 {
		t.Errorf("%d flips in a simulated hour of stationary demand: %+v", len(ds), ds)
	}
	if c.ctl.reversals > 1 {
		t.Errorf("%d reversals under stationary demand", c.ctl.reversals)
	}
}

func TestPinnedEnginesNeverMove(t *testing.T) {
	c := reactiveCore(t, "p0:prefill!", "p1:prefill!", "d0:decode!", "d1:decode!")
	drive(c, 0, 300, 20, 8000, 2)
	if p, _ := roles(c); p != 2 {
		t.Errorf("pinned fleet changed: %d prefill engines", p)
	}
	if len(c.ctl.refused) == 0 || c.ctl.refused[len(c.ctl.refused)-1].Why != "pins or nominated engine exclude every source candidate" {
		t.Errorf("refusals %+v, want the pin refusal", c.ctl.refused)
	}
}

func TestFloorsHold(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode", "d1:decode")
	c.ctl.cfg.MinDecode = 2
	drive(c, 0, 300, 20, 8000, 2) // prefill-heavy: would want 3P1D
	if _, d := roles(c); d < 2 {
		t.Errorf("%d decode engines, below min_decode 2", d)
	}
}

func TestDecodeFloorRepair(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode")
	c.SetLive("d0", false) // the only decode engine is lost
	ds := c.Tick(1)
	if len(ds) != 1 || !ds[0].Applied || ds[0].By != "decode_floor" || ds[0].Flip.To != fleet.Decode {
		t.Fatalf("decisions %+v, want one decode_floor move", ds)
	}
}

func TestAdvisoryModeMovesNothing(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "d0:decode", "d1:decode")
	c.ctl.cfg.Advisory = true
	ds := drive(c, 0, 180, 20, 8000, 2)
	if p, _ := roles(c); p != 2 || len(applied(ds)) != 0 {
		t.Fatalf("advisory mode moved engines: %d prefill", p)
	}
	seen := false
	for _, d := range ds {
		seen = seen || d.Result == ResultAdvisory
	}
	if !seen {
		t.Error("no advisory decision recorded")
	}
}

func TestCooldownAndDwell(t *testing.T) {
	c := reactiveCore(t, "p0:prefill", "p1:prefill", "p2:prefill", "d0:decode")
	c.ctl.observeTime(0)
	if f, why := c.ctl.flip(5, fleet.Decode, "test", flipOpts{}); f != nil || why != "decode cooldown has not elapsed" {
		t.Errorf("P→D at 5 s: %v %q; want the cooldown refusal (start counts as a P→D move)", f, why)
	}
	if f, _ := c.ctl.flip(11, fleet.Decode, "test", flipOpts{}); f == nil {
		t.Fatal("P→D after the cooldown refused")
	}
	c.ctl.cfg.Thresholds.DwellS = 30
	for _, i := range c.instances {
		if i.Role == fleet.Prefill {
			c.ctl.lastFlip[i.IID] = 20
		}
	}
	if f, why := c.ctl.flip(25, fleet.Decode, "test", flipOpts{}); f != nil || why != "source engine dwell has not elapsed" {
		t.Errorf("flip inside dwell: %v %q", f, why)
	}
}

func TestArrowMonitorMovesTowardDecodeUnderLoad(t *testing.T) {
	c := newCore(t, "p0:prefill", "p1:prefill", "d0:decode")
	c.opt.Policy = PolicyArrow
	// A decode engine ticking at 0.06 s per token: above the 0.05 s target.
	c.Track(0, req("a", 100, 1000))
	c.dispatched(0, "d0", "a", Decode)
	now := 0.0
	var ds []Decision
	for s := 0; s < 30; s++ {
		for k := 0; k < 16; k++ {
			now += 0.06
			c.OutputTokens(now, "d0", "a", 1)
		}
		ds = append(ds, c.Tick(now)...)
	}
	if a := applied(ds); len(a) == 0 || a[0].By != "algorithm2" || a[0].Flip.To != fleet.Decode {
		t.Fatalf("decisions %+v, want an algorithm2 move to decode", ds)
	}
}

// Controller decision time for 8, 64 and 256 engines with a full demand
// window.
func BenchmarkControllerEvaluation(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			specs := make([]string, n)
			for k := range specs {
				role := "decode"
				if k < n/2 {
					role = "prefill"
				}
				specs[k] = fmt.Sprintf("e%03d:%s", k, role)
			}
			c := newCore(b, specs...)
			c.opt.Policy = PolicyReactive
			drive(c, 0, 120, 50, 1500, 200)
			now := 120.0
			step := c.opt.Controller.Reactive.StepS
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				offer(c, now, step, 50, 1500+i%7*300, 200) // keep the window full and varied
				now += step
				b.StartTimer()
				c.Tick(now) // a step has elapsed: a full evaluation
			}
		})
	}
}
