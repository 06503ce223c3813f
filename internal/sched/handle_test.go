package sched

import (
	"reflect"
	"testing"
)

// OutputTokensOf is OutputTokens without the lookup: the same state, the
// same recorded steps, and nothing done for a request the core forgot.
func TestOutputTokensOfMatchesOutputTokens(t *testing.T) {
	run := func(byHandle bool) ([]Step, Loads, *Request) {
		c := newCore(t, "p0:prefill", "d0:decode")
		var log []Step
		c.Record(func(s Step) { log = append(log, s) })
		h := c.Track(0, Request{RID: "r1", InputLen: 64, WantedLen: 8})
		pl, _ := c.Place(0.1, "r1", nil, First)
		c.PrefillDone(0.2, pl.IID, "r1")
		d, _ := c.PlaceDecode(0.2, "r1", nil)
		for k := 0; k < 4; k++ {
			now := 0.3 + 0.05*float64(k)
			if byHandle {
				c.OutputTokensOf(now, d.IID, h, 1)
			} else {
				c.OutputTokens(now, d.IID, "r1", 1)
			}
		}
		loads := c.PoolLoads(0.5)
		c.Finished(0.6, "r1")
		if byHandle {
			c.OutputTokensOf(0.7, d.IID, h, 1) // forgotten: recorded, changes nothing
		} else {
			c.OutputTokens(0.7, d.IID, "r1", 1)
		}
		return log, loads, h
	}
	byID, loadsID, hID := run(false)
	byHandle, loadsHandle, hHandle := run(true)
	if !reflect.DeepEqual(byID, byHandle) {
		t.Fatalf("step logs differ:\nby id     %+v\nby handle %+v", byID, byHandle)
	}
	if loadsID != loadsHandle || hHandle.OutputLen != 4 || hID.OutputLen != hHandle.OutputLen {
		t.Fatalf("loads %+v / %+v, output %d / %d, want equal and 4", loadsID, loadsHandle, hID.OutputLen, hHandle.OutputLen)
	}
}

func TestAStaleHandleDoesNotActOnItsSuccessor(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	old := c.Track(0, Request{RID: "r1", InputLen: 64, WantedLen: 8})
	cur := c.Track(1, Request{RID: "r1", InputLen: 64, WantedLen: 8})
	c.OutputTokensOf(1.5, "d0", old, 3)
	if old.OutputLen != 0 || cur.OutputLen != 0 {
		t.Fatalf("a replaced handle counted tokens: old %d, current %d", old.OutputLen, cur.OutputLen)
	}
}
