package sched

import (
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Policy selects who changes roles.
type Policy int

const (
	// PolicyStatic never changes roles (a fixed kPnD split).
	PolicyStatic Policy = iota
	// PolicyReactive is the production controller: it scores the current
	// split against its adjacent splits on a demand model and moves at most
	// one engine per evaluation, behind confirmations and thrash guards.
	PolicyReactive
	// PolicyArrow is the Arrow paper's Algorithms 1–3: inline flips during
	// placement and a monitor trigger on pool loads. For comparison in the
	// simulator only.
	PolicyArrow
)

func (p Policy) String() string {
	switch p {
	case PolicyReactive:
		return "reactive"
	case PolicyArrow:
		return "arrow"
	}
	return "static"
}

// Flip is one role change.
type Flip struct {
	At              float64    `json:"at"`
	IID             string     `json:"iid"`
	To              fleet.Role `json:"to"`
	By              string     `json:"by"`
	PrefillInflight int        `json:"prefill_inflight"`
	DecodeInflight  int        `json:"decode_inflight"`
	DrainedS        *float64   `json:"drained_s"`
}

// Decision is the outcome of one controller evaluation.
type Decision struct {
	At      float64 `json:"at"`
	Prefill int     `json:"prefill"` // proposed split
	Decode  int     `json:"decode"`
	By      string  `json:"by"`
	Reason  string  `json:"reason"`
	Result  string  `json:"result"` // applied, held, blocked, advisory
	Applied bool    `json:"applied"`
	Flip    *Flip   `json:"flip,omitempty"`
	// Details are the scoring figures behind the decision (ratios,
	// demand), for /narwhal/state and the journal.
	Details map[string]float64 `json:"details,omitempty"`
}

// Decision results.
const (
	ResultApplied  = "applied"
	ResultHeld     = "held"
	ResultBlocked  = "blocked"
	ResultAdvisory = "advisory"
)

// Refused is a flip the guards refused.
type Refused struct {
	At  float64    `json:"at"`
	To  fleet.Role `json:"to"`
	Why string     `json:"why"`
}

// JournalDetails is the decision's details as the journal records them,
// with the flip's engine and target role when it flipped one.
func (d Decision) JournalDetails() map[string]any {
	out := make(map[string]any, len(d.Details)+2)
	for k, v := range d.Details {
		out[k] = v
	}
	if d.Flip != nil {
		out["iid"] = d.Flip.IID
		out["to"] = d.Flip.To
	}
	return out
}
