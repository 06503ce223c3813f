package enginemodel

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/units"
)

// linear is a Timing whose numbers are easy to check by hand.
type linear struct{}

func (linear) PrefillTime(n int) float64 { return 0.001 * float64(n) }
func (linear) CachedPrefillTime(c, u int) (float64, bool) {
	return 0, false
}
func (linear) TokenInterval(tokens, requests int) float64 {
	return 0.010 + 0.0001*float64(tokens) + 0.001*float64(requests)
}

func newModel(t *testing.T, capTokens int) *Model {
	t.Helper()
	m, err := New(Config{Timing: linear{}, KVCapacityTokens: capTokens, BlockSize: 16, MaxNumSeqs: 8})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ms(f float64) time.Duration { return units.Seconds(f) }

// run drives m to idle and returns, per request, the times of its tokens.
func run(t *testing.T, m *Model, limit int) (map[string][]time.Duration, []Step) {
	t.Helper()
	var now time.Duration
	times := map[string][]time.Duration{}
	var steps []Step
	for i := 0; i < limit; i++ {
		s, ok := m.Next()
		if !ok {
			return times, steps
		}
		steps = append(steps, s)
		now += s.Duration
		for _, e := range m.Complete(s) {
			if e.Kind == Token {
				times[e.ID] = append(times[e.ID], now)
			}
		}
	}
	t.Fatalf("model not idle after %d steps", limit)
	return nil, nil
}

func TestSingleRequestFollowsCurves(t *testing.T) {
	m := newModel(t, 1600)
	if err := m.Add(Request{ID: "a", PromptTokens: 100, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	times, _ := run(t, m, 20)
	want := []time.Duration{ms(0.1)}
	for k := 1; k < 4; k++ {
		want = append(want, want[k-1]+ms(linear{}.TokenInterval(100+k-1, 1)))
	}
	if len(times["a"]) != 4 {
		t.Fatalf("tokens = %v", times["a"])
	}
	for i := range want {
		if times["a"][i] != want[i] {
			t.Errorf("token %d at %v, want %v", i, times["a"][i], want[i])
		}
	}
	if st := m.Stats(); st.UsedBlocks != 0 || !m.Idle() {
		t.Errorf("blocks not freed: %+v", st)
	}
}

func TestRemoteKVSkipsPrefill(t *testing.T) {
	m := newModel(t, 1600)
	if err := m.Add(Request{ID: "d", PromptTokens: 100, MaxTokens: 2, CachedTokens: 100}); err != nil {
		t.Fatal(err)
	}
	times, steps := run(t, m, 10)
	if steps[0].Kind != Decode || times["d"][0] != ms(linear{}.TokenInterval(100, 1)) {
		t.Fatalf("first step %+v, first token %v", steps[0], times["d"])
	}
}

func TestHoldKeepsBlocksUntilRelease(t *testing.T) {
	m := newModel(t, 1600)
	_ = m.Add(Request{ID: "p", PromptTokens: 40, MaxTokens: 1, Hold: true})
	run(t, m, 5)
	if st := m.Stats(); st.UsedBlocks != 3 || st.Held != 1 {
		t.Fatalf("held stats %+v, want 3 blocks held", st)
	}
	m.Release("p")
	if st := m.Stats(); st.UsedBlocks != 0 || st.Held != 0 {
		t.Fatalf("after release %+v", st)
	}
}

func TestQueueingAndPreemption(t *testing.T) {
	cases := []struct {
		name            string
		capTokens       int
		reqs            []Request
		wantPreemptions int
		wantFirstSteps  []Kind
	}{
		{"both fit, one prefill step", 1600, []Request{{ID: "a", PromptTokens: 30, MaxTokens: 3}, {ID: "b", PromptTokens: 30, MaxTokens: 3}}, 0, []Kind{Prefill, Decode}},
		// 64 tokens = 4 blocks: each needs 2 blocks to start and a third
		// after 32 tokens, so the younger one is preempted and recomputed.
		{"preempt the younger", 64, []Request{{ID: "a", PromptTokens: 31, MaxTokens: 20}, {ID: "b", PromptTokens: 31, MaxTokens: 20}}, 1, []Kind{Prefill, Decode}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newModel(t, c.capTokens)
			for _, r := range c.reqs {
				if err := m.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			times, steps := run(t, m, 500)
			for i, k := range c.wantFirstSteps {
				if steps[i].Kind != k {
					t.Errorf("step %d kind %v, want %v", i, steps[i].Kind, k)
				}
			}
			for _, r := range c.reqs {
				if len(times[r.ID]) != r.MaxTokens {
					t.Errorf("%s got %d tokens, want %d", r.ID, len(times[r.ID]), r.MaxTokens)
				}
			}
			if st := m.Stats(); st.Preemptions != c.wantPreemptions || st.UsedBlocks != 0 {
				t.Errorf("stats %+v, want %d preemptions and no blocks", st, c.wantPreemptions)
			}
		})
	}
}

func TestAddRejects(t *testing.T) {
	m := newModel(t, 64)
	for _, r := range []Request{{ID: "", PromptTokens: 1, MaxTokens: 1}, {ID: "x", PromptTokens: 0, MaxTokens: 1}, {ID: "big", PromptTokens: 60, MaxTokens: 10}} {
		if err := m.Add(r); err == nil {
			t.Errorf("Add(%+v) accepted", r)
		}
	}
	_ = m.Add(Request{ID: "x", PromptTokens: 1, MaxTokens: 1})
	if err := m.Add(Request{ID: "x", PromptTokens: 1, MaxTokens: 1}); err == nil {
		t.Error("duplicate id accepted")
	}
}

func TestStopMidStepAndReset(t *testing.T) {
	m := newModel(t, 1600)
	_ = m.Add(Request{ID: "a", PromptTokens: 10, MaxTokens: 5})
	s, _ := m.Next()
	m.Stop("a")
	if evs := m.Complete(s); len(evs) != 0 {
		t.Fatalf("stopped request produced %v", evs)
	}
	_ = m.Add(Request{ID: "b", PromptTokens: 10, MaxTokens: 5})
	m.Next()
	m.Reset()
	if !m.Idle() || m.Stats().UsedBlocks != 0 {
		t.Fatal("reset left state")
	}
	if _, ok := m.Next(); ok {
		t.Fatal("step after reset")
	}
}

// transcript drives a model through arrivals, a mid-step stop and
// preemption, and writes down every step and event as it goes.
func transcript(t *testing.T, reuse bool) []string {
	t.Helper()
	m, err := New(Config{Timing: linear{}, KVCapacityTokens: 96, BlockSize: 16, MaxNumSeqs: 3, ReuseBuffers: reuse})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := 0; k < 400; k++ {
		if k < 6 {
			if err := m.Add(Request{ID: fmt.Sprintf("r%d", k), PromptTokens: 20 + k, MaxTokens: 20 + 5*k}); err != nil {
				t.Fatal(err)
			}
		}
		s, ok := m.Next()
		if !ok {
			break
		}
		out = append(out, fmt.Sprintf("step %v %v %v preempted %v", s.Kind, s.Duration, s.IDs, s.Preempted))
		if k == 4 {
			m.Stop(s.IDs[0])
		}
		for _, e := range m.Complete(s) {
			out = append(out, fmt.Sprintf("event %+v", e))
		}
	}
	return out
}

func TestReuseBuffersChangesNoStepOrEvent(t *testing.T) {
	fresh, reused := transcript(t, false), transcript(t, true)
	if len(fresh) < 20 || !strings.Contains(strings.Join(fresh, "\n"), "preempted [r") {
		t.Fatalf("the transcript exercises too little (%d lines, preemption: %v)", len(fresh), strings.Contains(strings.Join(fresh, "\n"), "preempted [r"))
	}
	if len(fresh) != len(reused) {
		t.Fatalf("%d lines fresh, %d reused", len(fresh), len(reused))
	}
	for i := range fresh {
		if fresh[i] != reused[i] {
			t.Fatalf("line %d: fresh %q, reused %q", i, fresh[i], reused[i])
		}
	}
}

func TestFreshBuffersSurviveTheNextStep(t *testing.T) {
	m := newModel(t, 1600)
	_ = m.Add(Request{ID: "a", PromptTokens: 10, MaxTokens: 3})
	s1, _ := m.Next()
	evs1 := m.Complete(s1)
	_ = m.Add(Request{ID: "b", PromptTokens: 10, MaxTokens: 3})
	s2, _ := m.Next()
	m.Complete(s2)
	if len(s1.IDs) != 1 || s1.IDs[0] != "a" || len(evs1) != 1 || evs1[0].ID != "a" {
		t.Fatalf("first step's slices changed under later steps: ids %v, events %v", s1.IDs, evs1)
	}
}

func TestEventsCarryTheirRequestsRef(t *testing.T) {
	m := newModel(t, 1600)
	refs := map[string]int{"a": 7, "b": 42}
	for id, ref := range refs {
		if err := m.Add(Request{ID: id, PromptTokens: 20, MaxTokens: 3, Ref: ref}); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for k := 0; k < 20; k++ {
		s, ok := m.Next()
		if !ok {
			break
		}
		for _, e := range m.Complete(s) {
			seen++
			if e.Ref != refs[e.ID] {
				t.Errorf("%v event of %s carries ref %d, want %d", e.Kind, e.ID, e.Ref, refs[e.ID])
			}
		}
	}
	if seen != 8 { // three tokens and a finish each
		t.Fatalf("saw %d events, want 8", seen)
	}
}

// A RefsOnly model takes the same steps and emits the same events as one
// that names requests, with every id left out: the driver finds its
// requests by Ref. Block sizes that are and are not powers of two.
func TestRefsOnlyChangesNoStepOrEvent(t *testing.T) {
	for _, bs := range []int{16, 12} {
		named, err := New(Config{Timing: linear{}, KVCapacityTokens: 96, BlockSize: bs, MaxNumSeqs: 3, ReuseBuffers: true})
		if err != nil {
			t.Fatal(err)
		}
		refs, _ := New(Config{Timing: linear{}, KVCapacityTokens: 96, BlockSize: bs, MaxNumSeqs: 3, ReuseBuffers: true, RefsOnly: true})
		events, preempted := 0, 0
		for k := 0; k < 400; k++ {
			if k < 6 {
				r := Request{ID: fmt.Sprintf("r%d", k), PromptTokens: 20 + k, MaxTokens: 20 + 5*k, Ref: 100 + k}
				if named.Add(r) != nil || refs.Add(r) != nil {
					t.Fatal("add failed")
				}
			}
			a, okA := named.Next()
			b, okB := refs.Next()
			if okA != okB {
				t.Fatalf("block size %d step %d: named model has a step %v, refs-only %v", bs, k, okA, okB)
			}
			if !okA {
				break
			}
			if a.Kind != b.Kind || a.Duration != b.Duration || a.ResidentTokens != b.ResidentTokens || a.Running != b.Running ||
				len(b.IDs) != 0 || len(b.Preempted) != 0 {
				t.Fatalf("block size %d step %d: named %+v, refs-only %+v", bs, k, a, b)
			}
			preempted += len(a.Preempted)
			if k == 4 {
				named.Stop(a.IDs[0])
				refs.Stop(a.IDs[0])
			}
			ea, eb := append([]Event(nil), named.Complete(a)...), refs.Complete(b)
			if len(ea) != len(eb) {
				t.Fatalf("block size %d step %d: %d events named, %d refs-only", bs, k, len(ea), len(eb))
			}
			for i := range ea {
				want := ea[i]
				want.ID = ""
				if eb[i] != want {
					t.Fatalf("block size %d step %d event %d: refs-only %+v, want %+v", bs, k, i, eb[i], want)
				}
				events++
			}
		}
		if events < 20 || preempted == 0 || named.Stats() != refs.Stats() {
			t.Fatalf("block size %d: %d events, %d preemptions, stats %+v vs %+v: the run exercises too little or diverged",
				bs, events, preempted, named.Stats(), refs.Stats())
		}
	}
}

// blockSizes is a model at each block size the block tests try: powers of
// two (the shift) and others (the division).
func blockSizes(t *testing.T) map[int]*Model {
	t.Helper()
	ms := map[int]*Model{}
	for _, bs := range []int{1, 2, 12, 16, 17, 64} {
		m, err := New(Config{Timing: linear{}, KVCapacityTokens: 4096, BlockSize: bs})
		if err != nil {
			t.Fatal(err)
		}
		ms[bs] = m
	}
	return ms
}

// blocksFor's shift answers as the division does, at every block size.
func TestBlocksForMatchesDivision(t *testing.T) {
	for bs, m := range blockSizes(t) {
		for tokens := 0; tokens < 1000; tokens++ {
			if got, want := m.blocksFor(tokens), (tokens+bs-1)/bs; got != want {
				t.Fatalf("block size %d: blocksFor(%d) = %d, want %d", bs, tokens, got, want)
			}
		}
	}
}

// needsBlock answers as blocksFor does at every block size, computed and
// held blocks (fewer, as many, or more than the tokens need).
func TestNeedsBlockMatchesBlocksFor(t *testing.T) {
	for bs, m := range blockSizes(t) {
		for computed := 0; computed < 300; computed++ {
			for blocks := 0; blocks < 300/bs+3; blocks++ {
				if got, want := needsBlock(computed, blocks, bs), m.blocksFor(computed+1) > blocks; got != want {
					t.Fatalf("block size %d: needsBlock(%d, %d) = %v, blocksFor says %v", bs, computed, blocks, got, want)
				}
			}
		}
	}
}

// A decode step's events are its batch's in admission order less the
// requests stopped while it ran, however many leave around them: one
// stopped between two that stay, one finishing on the step, the last
// stopped too.
func TestDecodeStepSkipsWhatLeftMidStep(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		m, err := New(Config{Timing: linear{}, KVCapacityTokens: 1600, BlockSize: 16, MaxNumSeqs: 8, ReuseBuffers: reuse})
		if err != nil {
			t.Fatal(err)
		}
		for k, max := range []int{9, 9, 2, 9, 9} {
			_ = m.Add(Request{ID: fmt.Sprintf("r%d", k), PromptTokens: 10, MaxTokens: max})
		}
		s, _ := m.Next() // the prefill: a first token each
		m.Complete(s)
		s, _ = m.Next() // a decode step of all five
		if s.Kind != Decode || len(s.IDs) != 5 {
			t.Fatalf("reuse %v: step %v of %v, want a decode step of five", reuse, s.Kind, s.IDs)
		}
		m.Stop("r1")
		m.Stop("r4")
		var got []string
		for _, e := range m.Complete(s) {
			got = append(got, fmt.Sprintf("%s %d %d", e.ID, e.Kind, e.Index))
		}
		want := []string{"r0 1 1", "r2 1 1", "r2 2 0", "r3 1 1"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("reuse %v: events %v, want %v", reuse, got, want)
		}
		if s, _ = m.Next(); strings.Join(s.IDs, " ") != "r0 r3" {
			t.Fatalf("reuse %v: the next step decodes %v, want r0 r3", reuse, s.IDs)
		}
	}
}

// withIntercept is linear with a per-request intercept of 10 ms.
type withIntercept struct{ linear }

func (withIntercept) PrefillTime(n int) float64 { return 0.01 + 0.001*float64(n) }

// A prefill step of several requests pays the step overhead once.
func TestBatchedPrefillPaysTheOverheadOnce(t *testing.T) {
	for _, tc := range []struct {
		overhead float64
		want     float64
	}{
		{0, 3 * (0.01 + 0.1)}, // each request its whole price
		{0.01, 0.01 + 3*0.1},  // one intercept for the step
		{0.5, (3 * 0.11) / 3}, // never below the step's mean request
	} {
		m, err := New(Config{Timing: withIntercept{}, KVCapacityTokens: 1 << 16, StepOverheadS: tc.overhead})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := m.Add(Request{ID: fmt.Sprint(i), PromptTokens: 100, MaxTokens: 2}); err != nil {
				t.Fatal(err)
			}
		}
		s, ok := m.Next()
		if !ok || s.Kind != Prefill || (s.Duration-ms(tc.want)).Abs() > time.Microsecond {
			t.Errorf("overhead %g: step %v %v, want a prefill of %.4f s", tc.overhead, s.Kind, s.Duration, tc.want)
		}
	}
}
