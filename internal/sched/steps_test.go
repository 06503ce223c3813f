package sched

import "testing"

// The compound prefill step dispatches only what both admission checks
// let through, and the decode step dispatches what it places.
func TestPlaceStepsDispatch(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Track(0, Request{RID: "r1", InputLen: 64, WantedLen: 8})
	pl, ref := c.Place(0.1, "r1", nil, First)
	if ref != nil || pl.IID == "" {
		t.Fatalf("prefill step refused: %+v", ref)
	}
	if got := c.requests["r1"].where(); got != pl.IID || c.requests["r1"].phase != Prefill {
		t.Fatalf("after the prefill step the request is at %q in phase %v, want %q in prefill", got, c.requests["r1"].phase, pl.IID)
	}
	c.PrefillDone(0.2, pl.IID, "r1")
	d, ref := c.PlaceDecode(0.2, "r1", nil)
	if ref != nil || c.requests["r1"].where() != d.IID || c.requests["r1"].phase != Decode {
		t.Fatalf("decode step: %+v, request at %q", ref, c.requests["r1"].where())
	}
}

func TestPlaceRefusalDispatchesNothing(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Track(0, Request{RID: "big", InputLen: 1_000_000, WantedLen: 8}) // 10 s of prefill against a 1 s TTFT
	if _, ref := c.Place(0, "big", nil, First); ref == nil {
		t.Fatal("a prompt that cannot meet the TTFT target was admitted")
	}
	if got := c.requests["big"].where(); got != "" {
		t.Fatalf("a refused request was dispatched to %q", got)
	}
}
