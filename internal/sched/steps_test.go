package sched

import "testing"

// The compound prefill step dispatches only what both admission checks
// let through, and the decode step dispatches what it places.
func TestStartStepsDispatch(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	r := c.Track(0, Request{RID: "r1", InputLen: 64, WantedLen: 8})
	pl, ref := c.StartPrefill(0.1, r, nil, 0, true)
	if ref != nil || pl.IID == "" {
		t.Fatalf("prefill step refused: %+v", ref)
	}
	if got := c.requests["r1"].at; got != pl.IID || c.requests["r1"].phase != Prefill {
		t.Fatalf("after the prefill step the request is at %q in phase %v, want %q in prefill", got, c.requests["r1"].phase, pl.IID)
	}
	c.PrefillDone(0.2, pl.IID, "r1")
	d, ref := c.StartDecode(0.2, r, nil)
	if ref != nil || c.requests["r1"].at != d.IID || c.requests["r1"].phase != Decode {
		t.Fatalf("decode step: %+v, request at %q", ref, c.requests["r1"].at)
	}
}

func TestStartPrefillRefusalDispatchesNothing(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	r := c.Track(0, Request{RID: "big", InputLen: 1_000_000, WantedLen: 8}) // 10 s of prefill against a 1 s TTFT
	if _, ref := c.StartPrefill(0, r, nil, 0, true); ref == nil {
		t.Fatal("a prompt that cannot meet the TTFT target was admitted")
	}
	if got := c.requests["big"].at; got != "" {
		t.Fatalf("a refused request was dispatched to %q", got)
	}
}
