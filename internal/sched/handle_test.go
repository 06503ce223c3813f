package sched

import (
	"reflect"
	"testing"

	"github.com/narwhal-go/narwhal/internal/profile"
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

// Capacity reuses one DecodeRPS value only across engines whose rows are
// equal but for the iid.
func TestProfClassGroupsRowsEqualButForTheIID(t *testing.T) {
	slower := row("c")
	slower.TPOTIntercept *= 2
	var before []*Instance
	var got []int
	for _, r := range []profile.Row{row("a"), row("b"), slower, row("d")} {
		i := &Instance{IID: r.IID, prof: r, profClass: profClass(before, r)}
		before = append(before, i)
		got = append(got, i.profClass)
	}
	if want := []int{0, 0, 2, 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("classes %v, want %v", got, want)
	}
}

// reportRounds reports rounds of one token of each of hs from d0, at
// 0.3 s and every step after, finishing "b" before round finishAt: with
// OneTokenEach when batched, else OutputTokensOf one by one.
func reportRounds(c *Core, hs []*Request, batched bool, rounds int, step float64, finishAt int) {
	for k := 0; k < rounds; k++ {
		now := 0.3 + step*float64(k)
		if k == finishAt {
			c.Finished(now, "b")
		}
		if batched {
			c.OneTokenEach(now, c.Instance("d0"), hs)
			continue
		}
		for _, h := range hs {
			c.OutputTokensOf(now, "d0", h, 1)
		}
	}
}

// OneTokenEach is OutputTokensOf(…, 1) for each request in turn: the same
// state, the same recorded steps, a forgotten request recorded and left
// alone, and the gaps credited to the reporting engine.
func TestOneTokenEachMatchesOutputTokensOf(t *testing.T) {
	run := func(batched bool) ([]Step, Loads, []int) {
		c := newCore(t, "p0:prefill", "d0:decode", "d1:decode")
		var log []Step
		c.Record(func(s Step) { log = append(log, s) })
		var hs []*Request
		for _, rid := range []string{"a", "b", "c"} {
			h := c.Track(0, Request{RID: rid, InputLen: 64, WantedLen: 8})
			pl, _ := c.Place(0.1, rid, nil, First)
			c.PrefillDone(0.2, pl.IID, rid)
			c.PlaceDecode(0.2, rid, nil)
			hs = append(hs, h)
		}
		reportRounds(c, hs, batched, 5, 0.04, 3)
		loads := c.PoolLoads(0.5)
		return log, loads, []int{hs[0].OutputLen, hs[1].OutputLen, hs[2].OutputLen}
	}
	oneByOne, loadsOne, outOne := run(false)
	batched, loadsBatch, outBatch := run(true)
	if !reflect.DeepEqual(oneByOne, batched) {
		t.Fatalf("step logs differ:\none by one %+v\nbatched    %+v", oneByOne, batched)
	}
	if loadsOne != loadsBatch || !reflect.DeepEqual(outOne, outBatch) || !reflect.DeepEqual(outBatch, []int{5, 3, 5}) {
		t.Fatalf("loads %+v / %+v, outputs %v / %v, want equal and [5 3 5]", loadsOne, loadsBatch, outOne, outBatch)
	}
	if loadsBatch.Decode == 0 {
		t.Fatal("decode load 0: the gaps never reached a window")
	}
}

// Without a recorder OneTokenEach takes its own loop; it leaves every
// engine's window and token sums and every request as OutputTokensOf
// does, token by token: requests resident on the reporting engine, on
// another one, not yet resident, and forgotten.
func TestOneTokenEachUnrecordedMatchesOutputTokensOf(t *testing.T) {
	run := func(batched bool) ([]Instance, []Request) {
		c := newCore(t, "p0:prefill", "d0:decode", "d1:decode")
		var hs []*Request
		for k, rid := range []string{"a", "b", "c", "d", "e"} {
			h := c.Track(0, Request{RID: rid, InputLen: 64 + 100*k, WantedLen: 8})
			hs = append(hs, h)
			if rid == "e" {
				continue // tracked, never placed
			}
			pl, _ := c.Place(0.1, rid, nil, First)
			if rid == "d" {
				continue // still on its prefill engine
			}
			c.PrefillDone(0.2, pl.IID, rid)
			c.PlaceDecode(0.2, rid, nil)
		}
		reportRounds(c, hs, batched, 6, 0.037, 4)
		var is []Instance
		for _, i := range c.instances {
			is = append(is, Instance{IID: i.IID, win: i.win, prefillTokens: i.prefillTokens, decodeTokens: i.decodeTokens})
		}
		var rs []Request
		for _, h := range hs {
			rs = append(rs, Request{RID: h.RID, OutputLen: h.OutputLen, lastToken: h.lastToken, tokensHere: h.tokensHere, sawToken: h.sawToken})
		}
		return is, rs
	}
	oneIs, oneRs := run(false)
	batchIs, batchRs := run(true)
	if !reflect.DeepEqual(oneIs, batchIs) || !reflect.DeepEqual(oneRs, batchRs) {
		t.Fatalf("state differs:\none by one %+v\n%+v\nbatched    %+v\n%+v", oneIs, oneRs, batchIs, batchRs)
	}
	if oneIs[0].win.gapTokens == 0 || oneIs[0].decodeTokens == 0 {
		t.Fatalf("d0's window %+v, decode tokens %d: the run credits nothing", oneIs[0].win, oneIs[0].decodeTokens)
	}
}
