package sched

import "github.com/narwhal-go/narwhal/internal/fleet"

// EngineView is one engine in a Snapshot.
type EngineView struct {
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
	Load            EngineLoad `json:"load"`
}

// Snapshot is an immutable view of the core, for /narwhal/state and
// metrics; readers never touch the core itself.
type Snapshot struct {
	At       float64      `json:"at"`
	Engines  []EngineView `json:"engines"` // sorted by iid
	Load     Loads        `json:"load"`
	Unserved int          `json:"unserved"`
	Tracked  int          `json:"tracked"`
	Queue    QueueView    `json:"queue"`
}

// Pool lists the iids labelled role.
func (s *Snapshot) Pool(role fleet.Role) []string {
	out := []string{}
	for _, e := range s.Engines {
		if e.Role == role {
			out = append(out, e.IID)
		}
	}
	return out
}

// Snapshot copies the state out at now.
func (c *Core) Snapshot(now float64) *Snapshot {
	s := &Snapshot{At: now, Load: c.PoolLoads(now), Unserved: c.unserved, Tracked: len(c.requests),
		Queue: c.queueView(now)}
	for _, i := range c.instances {
		s.Engines = append(s.Engines, EngineView{
			IID: i.IID, Role: i.Role, Pin: i.Pin, Live: i.Live,
			ResidentPrefill: len(i.prefill), ResidentDecode: len(i.decode),
			PrefillTokens: i.prefillTokens, DecodeTokens: i.decodeTokens,
			PrefillQueueS: i.prefillPrice, Correction: i.correction,
			Load: c.engineLoad(i, now),
		})
	}
	return s
}

// AnyLive reports whether some engine can take work.
func (c *Core) AnyLive() bool {
	for _, i := range c.instances {
		if i.Live {
			return true
		}
	}
	return false
}

// LeastResident is the live engine outside skip with the fewest resident
// requests, ties by iid; "" when there is none. The router counts prompts
// there.
func (c *Core) LeastResident(skip map[string]bool) string {
	var best *Instance
	for _, i := range c.instances {
		if i.Live && !skip[i.IID] && (best == nil || len(i.prefill)+len(i.decode) < len(best.prefill)+len(best.decode)) {
			best = i
		}
	}
	if best == nil {
		return ""
	}
	return best.IID
}

// Resident is the number of requests resident on the engine, both phases.
func (i *Instance) Resident() int { return len(i.prefill) + len(i.decode) }
