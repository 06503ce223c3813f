package routerdoc

import (
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// The state document's rows that the core, lifecycle and the residency
// tracker supply, as types of this package: the served narwhal.state v1
// document is spelled here, built from their snapshots field by field,
// so a change to a core type cannot reach the wire unseen (the golden
// test holds the bytes). Keys keep the order and spelling they had when
// the core's types were served directly.

// Engine is /narwhal/state.engines[].
type Engine struct {
	IID             string     `json:"iid"`
	Role            fleet.Role `json:"role"`
	Pin             bool       `json:"pin"`
	Live            bool       `json:"live"`
	ResidentPrefill int        `json:"resident_prefill"`
	ResidentDecode  int        `json:"resident_decode"`
	PrefillTokens   int        `json:"prefill_tokens"`
	DecodeTokens    int        `json:"decode_tokens"`
	PrefillQueueS   float64    `json:"prefill_queue_s"`
	Correction      float64    `json:"decode_correction"`
	Load            PhaseLoad  `json:"load"`
}

// PhaseLoad is an engine's prefill and decode load, in that key order.
type PhaseLoad struct {
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

// Flip is one role change (state.flips, control.last_decision.flip).
type Flip struct {
	At              float64    `json:"at"`
	IID             string     `json:"iid"`
	To              fleet.Role `json:"to"`
	By              string     `json:"by"`
	PrefillInflight int        `json:"prefill_inflight"`
	DecodeInflight  int        `json:"decode_inflight"`
	DrainedS        *float64   `json:"drained_s"`
}

// FlipRefused is a flip the controller wanted and did not make.
type FlipRefused struct {
	At  float64    `json:"at"`
	To  fleet.Role `json:"to"`
	Why string     `json:"why"`
}

// Decision is the controller's last decision.
type Decision struct {
	At      float64            `json:"at"`
	Prefill int                `json:"prefill"`
	Decode  int                `json:"decode"`
	By      string             `json:"by"`
	Reason  string             `json:"reason"`
	Result  string             `json:"result"`
	Applied bool               `json:"applied"`
	Flip    *Flip              `json:"flip,omitempty"`
	Details map[string]float64 `json:"details,omitempty"`
}

// DeadlineQueue is /narwhal/state.admission.deadline_queue.
type DeadlineQueue struct {
	Depth    int     `json:"depth"`
	KVTokens int     `json:"kv_tokens"`
	Limit    int     `json:"limit"`
	KVLimit  int     `json:"kv_limit"`
	DrainS   float64 `json:"drain_s"`
}

// Hold is an engine held out of placement (state.held, ready.held,
// lifecycle.engines[].held).
type Hold struct {
	IID    string  `json:"iid"`
	Cause  string  `json:"cause"`
	Detail string  `json:"detail"`
	Since  float64 `json:"since"`
}

// Residency is /narwhal/state.residency[iid]: an engine's prefix-cache
// residency view.
type Residency struct {
	Known          bool           `json:"known"`
	Reason         string         `json:"reason"`
	Epoch          string         `json:"epoch"`
	Sequence       int64          `json:"sequence"`
	BlockSize      int            `json:"block_size"`
	ResidentBlocks map[string]int `json:"resident_blocks"`
	Resyncs        int            `json:"resyncs"`
}

func engines(in []sched.EngineView) []Engine {
	out := make([]Engine, 0, len(in))
	for _, e := range in {
		out = append(out, Engine{IID: e.IID, Role: e.Role, Pin: e.Pin, Live: e.Live, ResidentPrefill: e.ResidentPrefill,
			ResidentDecode: e.ResidentDecode, PrefillTokens: e.PrefillTokens, DecodeTokens: e.DecodeTokens,
			PrefillQueueS: e.PrefillQueueS, Correction: e.Correction, Load: PhaseLoad{Prefill: e.Load.Prefill, Decode: e.Load.Decode}})
	}
	return out
}

func flip(f sched.Flip) Flip {
	return Flip{At: f.At, IID: f.IID, To: f.To, By: f.By, PrefillInflight: f.PrefillInflight, DecodeInflight: f.DecodeInflight, DrainedS: f.DrainedS}
}

// flips keeps nil as nil: the document has always said null for no history.
func flips(in []sched.Flip) []Flip {
	if in == nil {
		return nil
	}
	out := make([]Flip, 0, len(in))
	for _, f := range in {
		out = append(out, flip(f))
	}
	return out
}

func flipsRefused(in []sched.Refused) []FlipRefused {
	if in == nil {
		return nil
	}
	out := make([]FlipRefused, 0, len(in))
	for _, r := range in {
		out = append(out, FlipRefused{At: r.At, To: r.To, Why: r.Why})
	}
	return out
}

func decision(d *sched.Decision) *Decision {
	if d == nil {
		return nil
	}
	out := &Decision{At: d.At, Prefill: d.Prefill, Decode: d.Decode, By: d.By, Reason: d.Reason, Result: d.Result, Applied: d.Applied,
		Details: d.Details}
	if d.Flip != nil {
		f := flip(*d.Flip)
		out.Flip = &f
	}
	return out
}

func deadlineQueue(q sched.QueueView) DeadlineQueue {
	return DeadlineQueue{Depth: q.Depth, KVTokens: q.KVTokens, Limit: q.Limit, KVLimit: q.KVLimit, DrainS: q.DrainS}
}

// Holds is the document form of lifecycle's holds; nil stays nil.
func Holds(in []lifecycle.Hold) []Hold {
	if in == nil {
		return nil
	}
	out := make([]Hold, 0, len(in))
	for _, h := range in {
		out = append(out, Hold{IID: h.IID, Cause: h.Cause, Detail: h.Detail, Since: h.Since})
	}
	return out
}

func residencies(in map[string]residency.EngineState) map[string]Residency {
	if in == nil {
		return nil
	}
	out := make(map[string]Residency, len(in))
	for iid, r := range in {
		out[iid] = Residency{Known: r.Known, Reason: r.Reason, Epoch: r.Epoch, Sequence: r.Sequence, BlockSize: r.BlockSize,
			ResidentBlocks: r.ResidentBlocks, Resyncs: r.Resyncs}
	}
	return out
}
