package ui

import (
	"sort"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// Snapshot is what the dashboard reads from the router at one instant.
type Snapshot struct {
	State      routerdoc.StateDoc
	TTFT, TPOT metrics.Histogram
	Failures   []*journal.RequestRow // newest first
	// Lifecycle is each engine's lifecycle state (active, draining, …);
	// Generation its process generation (the accepted process start, Unix
	// seconds, 0 unknown); Tier its output tier where one is known.
	Lifecycle  map[string]string
	Generation map[string]float64
	Tier       map[string]string
	Now        float64 // router seconds, the scale of flip and row times
}

// Source is the router side of the dashboard.
type Source interface{ Snapshot() Snapshot }

// View is one feed message: everything the page shows.
type View struct {
	At       time.Time          `json:"at"`
	SLO      routerdoc.SLOState `json:"slo"`
	Engines  []Engine           `json:"engines"`
	Pools    Pools              `json:"pools"`
	Last1m   Window             `json:"last_1m"`
	Last5m   Window             `json:"last_5m"`
	Series   []Point            `json:"series"`
	Flips    []Flip             `json:"flips"`
	Drops    []Drop             `json:"drops"`
	Failures []Failure          `json:"failures"`
	Totals   Totals             `json:"totals"`
}

// Engine is one engine's row.
type Engine struct {
	IID        string  `json:"iid"`
	Role       string  `json:"role"`
	Pin        bool    `json:"pin"`
	Live       bool    `json:"live"`
	Lifecycle  string  `json:"lifecycle"`
	Status     string  `json:"status"` // serving, ejected, quarantined, held, draining, probation
	Tier       string  `json:"tier"`
	Generation float64 `json:"generation"`
	Prefill    int     `json:"resident_prefill"`
	Decode     int     `json:"resident_decode"`
}

// Pools are the two pools' sizes and loads (load ÷ its SLO target).
type Pools struct {
	Prefill     int     `json:"prefill"`
	Decode      int     `json:"decode"`
	PrefillLoad float64 `json:"prefill_load"`
	DecodeLoad  float64 `json:"decode_load"`
	MinPrefill  int     `json:"min_prefill"`
	MinDecode   int     `json:"min_decode"`
	Expand      float64 `json:"expand"`
	// Queued waits in the deadline queue; QueueDrainS is the core's
	// projection of when it drains.
	Queued      int     `json:"queued"`
	QueueLimit  int     `json:"queue_limit"`
	QueueDrainS float64 `json:"queue_drain_s"`
}

// Flip is one role change on the timeline.
type Flip struct {
	At     float64 `json:"at"` // router seconds
	IID    string  `json:"iid"`
	To     string  `json:"to"`
	By     string  `json:"by"`
	Reason string  `json:"reason"` // the controller decision's reason, when seen
}

// Drop is a count of requests not served, by outcome and cause.
type Drop struct {
	Terminal string `json:"terminal"`
	Cause    string `json:"cause"`
	Count    int    `json:"count"`
}

// Failure is one recent journal row that did not complete.
type Failure struct {
	RID      string  `json:"rid"`
	Arrived  float64 `json:"arrived"`
	Terminal string  `json:"terminal"`
	Reason   string  `json:"reason"`
	Status   int     `json:"status"`
	Engines  string  `json:"engines"`
	TraceID  string  `json:"trace_id"`
	Error    string  `json:"error"`
}

// Totals are the router's counts since start.
type Totals struct {
	Offered  int     `json:"offered"`
	Served   int     `json:"served"`
	SLOMet   int     `json:"slo_met"`
	Inflight int     `json:"inflight"`
	Limit    int     `json:"limit"`
	Now      float64 `json:"now"` // router seconds, to age the flips
}

func ended(s *routerdoc.StateDoc) int {
	return s.Served + s.Failed + s.Admission.Refused + s.Admission.Rejected + s.Expired + s.Cancelled
}

func engines(s *Snapshot) []Engine {
	st := &s.State
	status := map[string]string{}
	for _, set := range []struct {
		iids []string
		name string
	}{{st.Probation, "probation"}, {st.Draining, "draining"}, {st.Quarantined, "quarantined"}, {st.Ejected, "ejected"}} {
		for _, iid := range set.iids {
			status[iid] = set.name
		}
	}
	for _, h := range st.Held {
		status[h.IID] = "held"
	}
	out := make([]Engine, 0, len(st.Engines))
	for _, e := range st.Engines {
		row := Engine{IID: e.IID, Role: string(e.Role), Pin: e.Pin, Live: e.Live, Lifecycle: s.Lifecycle[e.IID],
			Status: status[e.IID], Tier: s.Tier[e.IID], Generation: s.Generation[e.IID],
			Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
		if row.Status == "" {
			row.Status = "serving"
		}
		out = append(out, row)
	}
	return out
}

func drops(st *routerdoc.StateDoc) []Drop {
	out := []Drop{}
	for terminal, causes := range st.OutcomeReasons {
		for cause, n := range causes {
			if n > 0 {
				out = append(out, Drop{Terminal: terminal, Cause: cause, Count: n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Terminal+out[i].Cause < out[j].Terminal+out[j].Cause
	})
	return out
}

func failures(rows []*journal.RequestRow) []Failure {
	out := make([]Failure, 0, len(rows))
	for _, r := range rows {
		f := Failure{RID: r.RID, Arrived: r.Arrived, Terminal: r.Terminal, Reason: str(r.Reason), TraceID: str(r.TraceID)}
		if r.Status != nil {
			f.Status = *r.Status
		}
		f.Engines = str(r.PrefillIID)
		if d := str(r.DecodeIID); d != "" {
			f.Engines += "→" + d
		}
		if f.Error = str(r.Error); len(f.Error) > 160 {
			f.Error = f.Error[:160] + "…"
		}
		out = append(out, f)
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// flips are the state's flip history, newest first, with the reasons of
// the decisions the hub saw.
func flips(history []routerdoc.Flip, reasons map[flipKey]string) []Flip {
	out := make([]Flip, 0, len(history))
	for i := len(history) - 1; i >= 0; i-- {
		f := history[i]
		out = append(out, Flip{At: f.At, IID: f.IID, To: string(f.To), By: f.By, Reason: reasons[flipKey{f.At, f.IID}]})
	}
	return out
}

type flipKey struct {
	at  float64
	iid string
}
