package routerdoc

import (
	"maps"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/state"
)

// StateInput is what the narwhal.state document is built from: one
// instant of the core and the counters (read together under the router's
// mutex), and the rest read beside it.
type StateInput struct {
	Fleet       *fleet.Config
	Core        *sched.Snapshot
	Control     sched.ControlState
	Counts      Counts // a Clone: State reads it after the router's mutex is released
	JournalRun  string
	Inflight    int   // admission seats taken
	Limit       int   // the admission limit
	Retained    int64 // completion requests from arrival to response end
	BodyReads   int
	MaxModelLen int

	Ejected     map[string]string // lifecycle: iid → why
	Records     []lifecycle.Record
	Probation   []string
	Health      map[string]HealthState
	Quarantined []string
	Held        []lifecycle.Hold
	Monitoring  MonitoringState
	Evidence    EvidenceState                    // each endpoint's tier, when the evidence pass runs
	Profiles    ProfilesState                    // the profile store the core prices with
	Residency   map[string]residency.EngineState // each engine's prefix-cache residency view (empty when none is followed)
}

// State is the narwhal.state v1 document: what the scheduler holds and
// what the router counted.
func State(in StateInput) StateDoc {
	snap, st, c, ctl := in.Core, in.Counts, in.Fleet, in.Control
	t := c.Controller.Thresholds
	resident := map[string]PhasePair[int]{}
	var pinned []string
	for _, e := range snap.Engines {
		resident[e.IID] = PhasePair[int]{Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
		if e.Pin {
			pinned = append(pinned, e.IID)
		}
	}
	return StateDoc{
		Schema: StateSchema, SchemaVersion: StateSchemaVersion,
		JournalRun: in.JournalRun, Controller: "reactive", TokenAccounting: "token_ids", Residency: residencies(in.Residency),
		Served: st.Served, SLOMet: st.SLOMet, Failed: st.Failed, Offered: st.Offered,
		UnsizedOffered: st.UnsizedOffered, Expired: st.Expired, Cancelled: st.Cancelled,
		InvalidRequests: st.Invalid, Unserved: snap.Unserved,
		OutcomeReasons: OutcomeReasons(st.Reasons),
		Admission: AdmissionState{
			Inflight: in.Inflight, QueueCapacity: c.Serving.QueueCapacity, Limit: in.Limit, DeadlineQueue: deadlineQueue(snap.Queue),
			Rejected: st.Rejected, Refused: st.Refused, EngineAuth: c.Engine.AuthMode(),
			Mode: c.Serving.Admission, Margin: c.Serving.AdmissionMargin,
		},
		Serving:            serving(in),
		FirstTokenTimeoutS: c.Engine.FirstTokenTimeoutS,
		Pools:              PhasePair[[]string]{Prefill: snap.Pool(fleet.Prefill), Decode: snap.Pool(fleet.Decode)},
		Load:               PhasePair[float64]{Prefill: snap.Load.Prefill, Decode: snap.Load.Decode},
		Engines:            engines(snap.Engines),
		Thresholds: ThresholdState{Expand: t.Expand, Shrink: t.Shrink, CooldownS: t.CooldownS,
			SustainedIntervals: t.SustainedIntervals, DwellS: t.DwellS, PanicRatio: t.PanicRatio},
		SLO:        SLOState{TTFTS: c.SLO.TTFT, TPOTS: c.SLO.TPOT},
		Resident:   resident,
		Pinned:     nonNil(pinned),
		MinPrefill: c.Controller.MinPrefill, MinDecode: c.Controller.MinDecode,
		Ejected: ejected(in.Ejected), Draining: draining(in.Records), Probation: in.Probation,
		Health: in.Health, Quarantined: nonNil(in.Quarantined), Held: Holds(in.Held),
		Control: ControlSummary{Advisory: ctl.Advisory, LastDecision: decision(ctl.LastDecision),
			Decisions: ctl.Decisions, Flips: ctl.Flips, FlipReversals: ctl.FlipReversals,
			FlipsRefused: flipsRefused(ctl.FlipsRefused)},
		PanicBypasses: ctl.PanicBypasses,
		Monitoring:    in.Monitoring,
		Evidence:      in.Evidence,
		Profiles:      in.Profiles,
		Flips:         flips(ctl.History), FlipsRefused: flipsRefused(ctl.FlipsRefused),
	}
}

// serving is /narwhal/state.serving.
func serving(in StateInput) ServingState {
	st := in.Counts
	failures := []AttemptFailure{}
	for k, n := range st.AttemptFailures {
		failures = append(failures, AttemptFailure{Phase: k[0], Reason: k[1], Count: n})
	}
	sort.Slice(failures, func(i, j int) bool {
		a, b := failures[i], failures[j]
		return a.Phase+a.Reason < b.Phase+b.Reason
	})
	return ServingState{
		HTTPRetained: in.Retained, HTTPRetainedLimit: in.Limit + in.Fleet.Serving.QueueCapacity,
		HTTPRetainedHighWater: st.RetainedHighWater, BodyReads: in.BodyReads,
		MaxModelLen:     in.MaxModelLen,
		PrefillAttempts: st.PrefillAttempts, DecodeAttempts: st.DecodeAttempts,
		RetryAttempts: st.Retries, RetryCredits: st.Credits, RetryCreditsSpent: st.CreditsSpent,
		RetryDenied: st.RetryDenied, ServedAfterRetry: st.ServedAfterRetry,
		AttemptFailures: failures, DecodeTokensObserved: st.DecodeTokens,
		UpstreamSeconds: PhasePair[float64]{Prefill: st.UpstreamPrefill, Decode: st.UpstreamDecode},
	}
}

// ejected are the ejected engines, sorted.
func ejected(m map[string]string) []string {
	out := []string{}
	for iid := range m {
		out = append(out, iid)
	}
	sort.Strings(out)
	return out
}

// draining are the engines not active, in the records' order.
func draining(records []lifecycle.Record) []string {
	out := []string{}
	for _, rec := range records {
		if rec.State != lifecycle.Active {
			out = append(out, rec.IID)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// OutcomeReasons is outcome_reasons: every terminal the document names,
// each with its reasons' counts (a copy).
func OutcomeReasons(m map[string]map[string]int) map[string]map[string]int {
	out := map[string]map[string]int{"failed": {}, "refused": {}, "rejected": {}, "expired": {}}
	for terminal, reasons := range m {
		if _, ok := out[terminal]; !ok {
			continue
		}
		for k, n := range reasons {
			out[terminal][k] = n
		}
	}
	return out
}

// Counts are the router's outcome and attempt counters, kept under its
// mutex; /narwhal/state and the handoff document report them, metrics
// mirror them.
type Counts struct {
	Offered, UnsizedOffered                  int
	Served, SLOMet                           int
	Failed, Expired, Cancelled, Invalid      int
	Refused, Rejected                        int
	Reasons                                  map[string]map[string]int // terminal → reason → n
	PrefillAttempts, DecodeAttempts, Retries int
	ServedAfterRetry, RetryDenied            int
	Credits, CreditsSpent                    float64
	AttemptFailures                          map[[2]string]int // (phase, reason) → n
	DecodeTokens                             int
	UpstreamPrefill, UpstreamDecode          float64
	RetainedHighWater                        int64
}

// Count counts a terminal outcome and its reason ("" for none).
func (s *Counts) Count(terminal, reason string) {
	switch terminal {
	case journal.TerminalCompleted:
		s.Served++
	case journal.TerminalFailed:
		s.Failed++
	case journal.TerminalExpired:
		s.Expired++
	case journal.TerminalCancelled:
		s.Cancelled++
	case journal.TerminalInvalid:
		s.Invalid++
	case journal.TerminalRefused:
		s.Refused++
	case journal.TerminalRejected:
		s.Rejected++
	}
	if reason == "" {
		return
	}
	if s.Reasons == nil {
		s.Reasons = map[string]map[string]int{}
	}
	if s.Reasons[terminal] == nil {
		s.Reasons[terminal] = map[string]int{}
	}
	s.Reasons[terminal][reason]++
}

// AttemptFailed counts a failed attempt of phase for reason.
func (s *Counts) AttemptFailed(phase, reason string) {
	if s.AttemptFailures == nil {
		s.AttemptFailures = map[[2]string]int{}
	}
	s.AttemptFailures[[2]string{phase, reason}]++
}

// Clone is a copy that shares no map with s.
func (s Counts) Clone() Counts {
	out := s
	out.Reasons = make(map[string]map[string]int, len(s.Reasons))
	for terminal, reasons := range s.Reasons {
		out.Reasons[terminal] = maps.Clone(reasons)
	}
	out.AttemptFailures = maps.Clone(s.AttemptFailures)
	return out
}

// Handoff is the counters as the handoff document records them, with
// the core's unserved count.
func (s Counts) Handoff(unserved int) state.Counters {
	return state.Counters{Offered: int64(s.Offered), UnsizedOffered: int64(s.UnsizedOffered), Served: int64(s.Served),
		SLOMet: int64(s.SLOMet), Expired: int64(s.Expired), InvalidRequests: int64(s.Invalid), Failed: int64(s.Failed),
		Refused: int64(s.Refused), Rejected: int64(s.Rejected), Cancelled: int64(s.Cancelled), Unserved: int64(unserved)}
}

// Restore takes back the counters and outcome reasons a handoff document
// recorded.
func (s *Counts) Restore(c state.Counters, reasons map[string]map[string]int) {
	s.Offered, s.UnsizedOffered, s.Served, s.SLOMet = int(c.Offered), int(c.UnsizedOffered), int(c.Served), int(c.SLOMet)
	s.Expired, s.Invalid, s.Failed = int(c.Expired), int(c.InvalidRequests), int(c.Failed)
	s.Refused, s.Rejected, s.Cancelled = int(c.Refused), int(c.Rejected), int(c.Cancelled)
	s.Reasons = reasons
}
