// Package enginemodel is the timing and capacity model of one vLLM engine
// running continuous batching: which requests a step admits, which it
// preempts, and how long the step takes. It has no I/O, no goroutines and
// no clock: a driver asks for the next step, waits its Duration on whatever
// clock it has (real, fake or virtual), then reports the step complete.
// simengine drives it with ports.Clock; the fleet simulator drives the very
// same code under virtual time.
package enginemodel

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/narwhal-go/narwhal/internal/units"
)

// Timing prices work; profile.Row implements it. Times are in seconds.
type Timing interface {
	PrefillTime(n int) float64
	CachedPrefillTime(cached, uncached int) (float64, bool)
	TokenInterval(tokens, requests int) float64
}

// Config sizes the engine.
type Config struct {
	Timing           Timing
	KVCapacityTokens int // GPU KV cache size in tokens
	BlockSize        int // tokens per KV block (vLLM default 16)
	MaxNumSeqs       int // max running requests (vLLM --max-num-seqs)
	MaxBatchedTokens int // prompt tokens one prefill step may compute (--max-num-batched-tokens)
	// StepOverheadS is the part of each request's prefill time that a step
	// pays once however many requests it prefills: vLLM's scheduler puts
	// every scheduled request's tokens in one step and one forward
	// (vllm/v1/core/sched/scheduler.py, Scheduler.schedule, at
	// 00024d314514900f361ad072af6931e403b7f589: one token_budget per step),
	// so a profile's intercept, measured one request at a time, is not
	// paid again for each request batched with it. 0 charges every request
	// its whole price, as if prefilled alone (the fleet simulator's model).
	StepOverheadS float64
	// ReuseBuffers lets the model reuse the slices it hands out: a Step's
	// IDs and Preempted until the next Next, Complete's events until the
	// next Complete; and a dropped request's struct serves the next Add.
	// For a driver that is done with a step once it completes it (the
	// fleet simulator), it saves an allocation per step and per request.
	ReuseBuffers bool
	// RefsOnly names requests in steps and events by Ref alone: a Step's
	// IDs and Preempted stay nil and an Event's ID is empty. For a driver
	// that finds its requests by Ref (the fleet simulator), it saves
	// copying an id per request per step.
	RefsOnly bool
}

// Request is one engine request.
type Request struct {
	ID           string
	PromptTokens int
	MaxTokens    int
	// CachedTokens already have KV on this engine (a NIXL pull or a prefix
	// hit). When they cover all but the last prompt token the request skips
	// the prefill step and its first token comes from the next decode step,
	// as on a vLLM decode engine.
	CachedTokens int
	// Hold keeps the request's KV blocks after it finishes until Release:
	// a prefill leg holding its blocks under a NIXL lease.
	Hold bool
	// Ref is the caller's own handle for the request, echoed in its
	// events so that a driver can find its state without a lookup by ID.
	// The model never reads it.
	Ref int
}

// Kind is what a step computes.
type Kind int

const (
	Prefill Kind = iota + 1
	Decode
)

func (k Kind) String() string {
	if k == Prefill {
		return "prefill"
	}
	return "decode"
}

// Step is one forward pass the driver must wait out.
type Step struct {
	Kind      Kind
	Duration  time.Duration
	IDs       []string // requests computed by the step
	Preempted []string // requests pushed back to waiting before the step
	// ResidentTokens and Running are the decode operating point the
	// duration was priced at (0 for prefill steps).
	ResidentTokens, Running int
	seq                     uint64
}

// EventKind says what happened to a request when a step completed.
type EventKind int

const (
	Token    EventKind = iota + 1 // one output token; Index counts from 0
	Finished                      // reached MaxTokens
)

// Event is one outcome of a completed step, in request admission order.
type Event struct {
	Kind  EventKind
	ID    string
	Index int
	Ref   int // the request's Ref
}

type req struct {
	Request
	generated int
	computed  int // tokens with KV on this engine
	blocks    int // blocks allocated
	running   bool
	finished  bool
}

// Model is one engine's scheduler state. Not safe for concurrent use.
type Model struct {
	cfg         Config
	totalBlocks int
	usedBlocks  int
	waiting     []*req
	running     []*req // admission order
	all         map[string]*req
	inflight    bool   // a step is planned and not yet completed
	seq         uint64 // the latest step's; Complete ignores any other
	batch       []*req // the in-flight prefill step's requests, in its IDs order
	preemptions int
	blockShift  int // log2(BlockSize) when it is a power of two, else -1

	// Scratch buffers reused across steps (see Config.ReuseBuffers for the
	// ones handed out).
	admitted, prefill []*req
	grow              []*req // growDecode's requests crossing into a new block
	free              []*req // dropped requests' structs, for Add (ReuseBuffers)
	ids, victims      []string
	events            []Event
}

// New checks cfg and returns an idle model.
func New(cfg Config) (*Model, error) {
	if cfg.Timing == nil {
		return nil, errors.New("enginemodel: Timing is required (pass a profile row)")
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 16
	}
	if cfg.KVCapacityTokens < cfg.BlockSize {
		return nil, fmt.Errorf("enginemodel: KVCapacityTokens %d is below one block of %d tokens", cfg.KVCapacityTokens, cfg.BlockSize)
	}
	if cfg.MaxNumSeqs <= 0 {
		cfg.MaxNumSeqs = 256
	}
	if cfg.MaxBatchedTokens <= 0 {
		cfg.MaxBatchedTokens = 8192
	}
	m := &Model{cfg: cfg, totalBlocks: cfg.KVCapacityTokens / cfg.BlockSize, all: map[string]*req{}, blockShift: -1}
	if b := cfg.BlockSize; b&(b-1) == 0 {
		m.blockShift = bits.TrailingZeros(uint(b))
	}
	return m, nil
}

// Stats is the scheduler's gauges.
type Stats struct {
	Running, Waiting        int
	UsedBlocks, TotalBlocks int
	Preemptions             int
	Held                    int // finished requests still holding blocks
	BlockSize               int
	ResidentTokens          int
}

// Stats reports the current gauges.
func (m *Model) Stats() Stats {
	s := Stats{Running: len(m.running), Waiting: len(m.waiting), UsedBlocks: m.usedBlocks,
		TotalBlocks: m.totalBlocks, Preemptions: m.preemptions, BlockSize: m.cfg.BlockSize}
	for _, r := range m.all {
		if r.finished {
			s.Held++
		}
	}
	for _, r := range m.running {
		s.ResidentTokens += r.computed
	}
	return s
}

// Add queues a request at the back of the waiting queue.
func (m *Model) Add(r Request) error {
	if r.ID == "" || m.all[r.ID] != nil {
		return fmt.Errorf("enginemodel: request id %q is empty or already in use", r.ID)
	}
	if r.PromptTokens <= 0 || r.MaxTokens <= 0 {
		return fmt.Errorf("enginemodel: request %s needs a prompt and max tokens (got %d, %d)", r.ID, r.PromptTokens, r.MaxTokens)
	}
	if m.blocksFor(r.PromptTokens+r.MaxTokens) > m.totalBlocks {
		return fmt.Errorf("enginemodel: request %s needs %d tokens of KV, more than the engine's %d", r.ID, r.PromptTokens+r.MaxTokens, m.cfg.KVCapacityTokens)
	}
	var q *req
	if n := len(m.free); n > 0 {
		q, m.free = m.free[n-1], m.free[:n-1]
	} else {
		q = new(req)
	}
	*q = req{Request: r, computed: min(max(r.CachedTokens, 0), r.PromptTokens)}
	m.all[r.ID] = q
	m.waiting = append(m.waiting, q)
	return nil
}

// Idle reports whether there is nothing to compute.
func (m *Model) Idle() bool { return len(m.running) == 0 && len(m.waiting) == 0 }

// blocksFor is how many blocks hold tokens: a shift instead of a
// division when the block size allows, for the same answer.
func (m *Model) blocksFor(tokens int) int {
	if n := tokens + m.cfg.BlockSize - 1; m.blockShift >= 0 && n >= 0 {
		return n >> m.blockShift
	}
	return (tokens + m.cfg.BlockSize - 1) / m.cfg.BlockSize
}

// Next plans the next step, or reports false when there is nothing to do or
// a step is already in flight. Prefill has priority: a step either prefills
// newly admitted requests or decodes one token for every running request.
func (m *Model) Next() (Step, bool) {
	if m.inflight {
		return Step{}, false
	}
	prefill := m.prefill[:0]
	for _, r := range m.admit() {
		if r.computed < r.PromptTokens+r.generated-1 {
			prefill = append(prefill, r)
		}
	}
	m.prefill = prefill
	m.seq++
	if len(prefill) > 0 {
		s := Step{Kind: Prefill, seq: m.seq}
		var secs float64
		for _, r := range prefill {
			secs += m.prefillCost(r)
		}
		if k := len(prefill); k > 1 && m.cfg.StepOverheadS > 0 {
			secs = max(secs/float64(k), secs-float64(k-1)*m.cfg.StepOverheadS)
		}
		m.batch = append(m.batch[:0], prefill...)
		s.IDs = m.plan(m.batch)
		s.Duration = units.Seconds(secs)
		return s, true
	}
	if len(m.running) == 0 {
		return Step{}, false
	}
	s := Step{Kind: Decode, seq: m.seq}
	s.Preempted, s.ResidentTokens = m.growDecode()
	s.IDs = m.plan(m.running) // the step decodes m.running: Complete reads it there
	s.Running = len(m.running)
	s.Duration = units.Seconds(m.cfg.Timing.TokenInterval(s.ResidentTokens, s.Running))
	return s, true
}

// plan puts the step computing batch in flight and returns its IDs.
func (m *Model) plan(batch []*req) []string {
	m.inflight = true
	if m.cfg.RefsOnly {
		return nil
	}
	ids := m.ids[:0]
	if !m.cfg.ReuseBuffers {
		ids = make([]string, 0, len(batch))
	}
	for _, r := range batch {
		ids = append(ids, r.ID)
	}
	if m.cfg.ReuseBuffers {
		m.ids = ids
	}
	return ids
}

func (m *Model) prefillCost(r *req) float64 {
	total := r.PromptTokens + r.generated // recompute after preemption includes the output so far
	if r.computed <= 0 {
		return m.cfg.Timing.PrefillTime(total)
	}
	if v, ok := m.cfg.Timing.CachedPrefillTime(r.computed, total-r.computed); ok {
		return v
	}
	return m.cfg.Timing.PrefillTime(total - r.computed)
}

// admit moves waiting requests to running in FIFO order while their KV fits
// (prompt, output so far and one new token) and seats remain. It stops at
// the first that does not fit, as vLLM's FCFS scheduler does.
func (m *Model) admit() []*req {
	out := m.admitted[:0]
	budget := m.cfg.MaxBatchedTokens
	for len(m.waiting) > 0 && len(m.running) < m.cfg.MaxNumSeqs {
		r := m.waiting[0]
		need := m.blocksFor(r.PromptTokens + r.generated + 1)
		work := r.PromptTokens + r.generated - r.computed
		if m.usedBlocks-r.blocks+need > m.totalBlocks || (len(out) > 0 && work > budget) {
			break
		}
		budget -= work
		m.usedBlocks += need - r.blocks
		r.blocks = need
		r.running = true
		m.waiting = m.waiting[1:]
		m.running = append(m.running, r)
		out = append(out, r)
	}
	m.admitted = out
	return out
}

// growDecode gives every running request the block its next token needs,
// after makeRoom's preemptions when they do not all fit, and returns the
// victims and the resident tokens of the requests left running (the
// decode step's operating point). One pass sums the resident tokens and
// lists the requests that need a block. Their blocks are all the room the
// step can take (a request holding more than its next token needs gives
// some back in makeRoom's sum, never takes more), so when they fit,
// nothing is preempted and only they are touched again; otherwise
// makeRoom's exact sum decides.
func (m *Model) growDecode() (victims []string, resident int) {
	grow, bs := m.grow[:0], m.cfg.BlockSize
	for _, r := range m.running {
		resident += r.computed
		if needsBlock(r.computed, r.blocks, bs) {
			grow = append(grow, r)
		}
	}
	m.grow = grow
	taken := 0
	for _, r := range grow {
		taken += m.blocksFor(r.computed+1) - r.blocks
	}
	if len(m.running) > 1 && m.usedBlocks+taken > m.totalBlocks {
		victims = m.makeRoom()
		return victims, m.growAll()
	}
	for _, r := range grow {
		need := m.blocksFor(r.computed + 1)
		m.usedBlocks += need - r.blocks
		r.blocks = need
	}
	if m.cfg.ReuseBuffers { // makeRoom's answer when nothing is preempted
		m.victims = m.victims[:0]
		victims = m.victims
	}
	return victims, resident
}

// needsBlock reports whether a request with computed tokens in blocks
// blocks of bs tokens needs another for its next token: blocksFor(computed
// + 1) > blocks, without the division or shift (⌈(c+1)/bs⌉ > b exactly
// when c+1 > b·bs).
func needsBlock(computed, blocks, bs int) bool { return computed >= blocks*bs }

// growAll gives every running request the block for its next token (room
// was made) and returns their resident tokens.
func (m *Model) growAll() (resident int) {
	for _, r := range m.running {
		if need := m.blocksFor(r.computed + 1); need > r.blocks {
			m.usedBlocks += need - r.blocks
			r.blocks = need
		}
		resident += r.computed
	}
	return resident
}

// makeRoom preempts the most recently admitted requests until every running
// request can grow by one token (vLLM's recompute preemption). The victims
// lose their KV and go back to the front of the queue. Next gives the
// survivors their blocks.
func (m *Model) makeRoom() []string {
	var victims []string
	if m.cfg.ReuseBuffers {
		victims = m.victims[:0]
	}
	for len(m.running) > 1 {
		extra := 0
		for _, r := range m.running {
			extra += m.blocksFor(r.computed+1) - r.blocks
		}
		if m.usedBlocks+extra <= m.totalBlocks {
			break
		}
		v := m.running[len(m.running)-1]
		m.running = m.running[:len(m.running)-1]
		m.freeBlocks(v)
		v.running, v.computed = false, 0
		m.waiting = append([]*req{v}, m.waiting...)
		m.preemptions++
		if !m.cfg.RefsOnly {
			victims = append(victims, v.ID)
		}
	}
	if m.cfg.ReuseBuffers {
		m.victims = victims
	}
	return victims
}

func (m *Model) freeBlocks(r *req) {
	m.usedBlocks -= r.blocks
	r.blocks = 0
}

// Complete applies the in-flight step and returns its events. Requests that
// were aborted while the step ran are skipped.
func (m *Model) Complete(s Step) []Event {
	if !m.inflight || m.seq != s.seq {
		return nil
	}
	m.inflight = false
	var evs []Event
	if m.cfg.ReuseBuffers {
		evs = m.events[:0]
	}
	if s.Kind != Prefill {
		evs = m.completeDecode(evs)
	} else {
		// At most a token and a finish per request: grown once, so that
		// each event is written in place.
		evs = slices.Grow(evs, 2*len(m.batch))
		for _, r := range m.batch {
			// A request stopped, released or reset away while the step ran
			// is no longer running (a new one under its id waits).
			if !r.running {
				continue
			}
			r.computed = r.PromptTokens + r.generated
			if r.generated > 0 {
				continue // a recomputed request resumes at the next decode step
			}
			evs = m.emit(evs, Token, r, r.generated)
			r.generated++
			if r.generated >= r.MaxTokens {
				evs = m.finishing(evs, r)
			}
		}
	}
	if m.cfg.ReuseBuffers {
		m.events = evs
	}
	return evs
}

// completeDecode is Complete of a decode step: a token for every request
// still running. The step decoded m.running as Next left it; since then
// requests can only have left it (stopped, released or reset away: no
// step is planned while one is in flight, so none was admitted), in
// order, so m.running now is the step's batch less the requests it must
// skip. A request finishing here leaves it too, and the next one moves
// into its place.
func (m *Model) completeDecode(evs []Event) []Event {
	evs = slices.Grow(evs, 2*len(m.running))
	for k := 0; k < len(m.running); {
		r := m.running[k]
		r.computed = max(r.computed, r.PromptTokens+r.generated)
		evs = m.emit(evs, Token, r, r.generated)
		r.generated++
		if r.generated < r.MaxTokens {
			k++
			continue
		}
		evs = m.finishing(evs, r) // the next request moves into k
	}
	return evs
}

// finishing is r's Finished event and its finish (r leaves m.running):
// once per request, a call out of the per-token loops.
//
//go:noinline
func (m *Model) finishing(evs []Event, r *req) []Event {
	evs = m.emit(evs, Finished, r, 0)
	m.finish(r)
	return evs
}

// emit writes r's next event in place (evs has room for it). A RefsOnly
// model names no request, so its events' IDs are all empty already: the
// string is not written (nor its write barrier checked) per token.
func (m *Model) emit(evs []Event, k EventKind, r *req, index int) []Event {
	evs = evs[:len(evs)+1]
	ev := &evs[len(evs)-1]
	ev.Kind, ev.Index, ev.Ref = k, index, r.Ref
	if !m.cfg.RefsOnly {
		ev.ID = r.ID
	}
	return evs
}

// finish takes r out of the batch, keeping its blocks when it holds them.
func (m *Model) finish(r *req) {
	m.removeRunning(r)
	r.running = false
	if r.Hold {
		r.finished = true
		return
	}
	m.freeBlocks(r)
	m.drop(r)
}

// drop forgets r. With ReuseBuffers its struct waits for the next Add: a
// dropped request is in no queue, and a step in flight that still lists
// it skips it as not running, whatever Add put there since.
func (m *Model) drop(r *req) {
	delete(m.all, r.ID)
	if m.cfg.ReuseBuffers {
		m.free = append(m.free, r)
	}
}

func (m *Model) removeRunning(r *req) {
	for i, x := range m.running {
		if x == r {
			m.running = append(m.running[:i], m.running[i+1:]...)
			return
		}
	}
}

// Stop ends a request early (a stop string matched, or the client left),
// wherever it is. Held requests keep their blocks until Release. It reports
// whether the request was known.
func (m *Model) Stop(id string) bool {
	r := m.all[id]
	if r == nil || r.finished {
		return false
	}
	if r.running {
		m.finish(r)
		return true
	}
	for i, x := range m.waiting {
		if x == r {
			m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
			break
		}
	}
	if r.Hold && r.computed > 0 {
		r.finished = true
		return true
	}
	m.freeBlocks(r)
	m.drop(r)
	return true
}

// Release frees a finished request's held blocks (a lease ended or the
// consumer read them) or drops a request outright.
func (m *Model) Release(id string) {
	r := m.all[id]
	if r == nil {
		return
	}
	if !r.finished {
		r.Hold = false
		m.Stop(id)
		return
	}
	m.freeBlocks(r)
	m.drop(r)
}

// Reset drops everything, as a process restart loses all resident KV.
func (m *Model) Reset() {
	m.waiting, m.running, m.all, m.inflight, m.usedBlocks = nil, nil, map[string]*req{}, false, 0
	clear(m.batch)
	m.batch = m.batch[:0]
}
