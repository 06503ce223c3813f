// Package routerdoc declares the router's JSON documents: /narwhal/state
// (narwhal.state v1, with its monitoring and health sections) and
// /narwhal/lifecycle (narwhal.lifecycle v1). The router fills them;
// clients and tests can decode into them.
package routerdoc

import (
	"bytes"
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/lifecycle"
)

// The documents' names and versions. Keys are snake_case; after schema
// and schema_version, fields are declared in key order so the bytes match
// what the documents were when they were built as maps.
const (
	StateSchema            = "narwhal.state"
	StateSchemaVersion     = 1
	LifecycleSchema        = "narwhal.lifecycle"
	LifecycleSchemaVersion = 1
)

// StateDoc is the narwhal.state v1 document: what the scheduler holds and
// what the router counted.
type StateDoc struct {
	Schema             string                    `json:"schema"`
	SchemaVersion      int                       `json:"schema_version"`
	Admission          AdmissionState            `json:"admission"`
	Cancelled          int                       `json:"cancelled"`
	Control            ControlSummary            `json:"control"`
	Controller         string                    `json:"controller"`
	Draining           []string                  `json:"draining"`
	Ejected            []string                  `json:"ejected"`
	Engines            []Engine                  `json:"engines"`
	Evidence           EvidenceState             `json:"evidence"`
	Profiles           ProfilesState             `json:"profiles"`
	Expired            int                       `json:"expired"`
	Failed             int                       `json:"failed"`
	FirstTokenTimeoutS float64                   `json:"first_token_timeout_s"`
	Flips              []Flip                    `json:"flips"`
	FlipsRefused       []FlipRefused             `json:"flips_refused"`
	Health             map[string]HealthState    `json:"health"`
	Held               []Hold                    `json:"held"`
	InvalidRequests    int                       `json:"invalid_requests"`
	JournalRun         string                    `json:"journal_run"`
	Load               PhasePair[float64]        `json:"load"`
	MinDecode          int                       `json:"min_decode"`
	MinPrefill         int                       `json:"min_prefill"`
	Monitoring         MonitoringState           `json:"monitoring"`
	Offered            int                       `json:"offered"`
	OutcomeReasons     map[string]map[string]int `json:"outcome_reasons"` // terminal → reason → n
	PanicBypasses      int                       `json:"panic_bypasses"`
	Pinned             []string                  `json:"pinned"`
	Pools              PhasePair[[]string]       `json:"pools"`
	Probation          []string                  `json:"probation"`
	Quarantined        []string                  `json:"quarantined"`
	Resident           map[string]PhasePair[int] `json:"resident"`
	// Residency is each engine's prefix-cache residency view (empty when
	// no engine serves residency).
	Residency       map[string]Residency `json:"residency"`
	Served          int                  `json:"served"`
	Serving         ServingState         `json:"serving"`
	SLO             SLOState             `json:"slo"`
	SLOMet          int                  `json:"slo_met"`
	Thresholds      ThresholdState       `json:"thresholds"`
	TokenAccounting string               `json:"token_accounting"`
	Unserved        int                  `json:"unserved"`
	UnsizedOffered  int                  `json:"unsized_offered"`
}

// PhasePair is one figure for each phase.
type PhasePair[T any] struct {
	Decode  T `json:"decode"`
	Prefill T `json:"prefill"`
}

// AdmissionState is /narwhal/state.admission.
type AdmissionState struct {
	EngineAuth    string  `json:"engine_auth"`
	Inflight      int     `json:"inflight"`
	Limit         int     `json:"limit"`
	Margin        float64 `json:"margin"`
	Mode          string  `json:"mode"`
	QueueCapacity int     `json:"queue_capacity"`
	Refused       int     `json:"refused"`
	Rejected      int     `json:"rejected"`
	// DeadlineQueue is the core's deadline queue now (depth, KV tokens,
	// bounds, projected drain).
	DeadlineQueue DeadlineQueue `json:"deadline_queue"`
}

// ServingState is /narwhal/state.serving: the request path's counters.
type ServingState struct {
	AttemptFailures       []AttemptFailure   `json:"attempt_failures"`
	BodyReads             int                `json:"body_reads"`
	DecodeAttempts        int                `json:"decode_attempts"`
	DecodeTokensObserved  int                `json:"decode_tokens_observed"`
	HTTPRetained          int64              `json:"http_retained"`
	HTTPRetainedHighWater int64              `json:"http_retained_high_water"`
	HTTPRetainedLimit     int                `json:"http_retained_limit"`
	MaxModelLen           int                `json:"max_model_len"`
	PrefillAttempts       int                `json:"prefill_attempts"`
	RetryAttempts         int                `json:"retry_attempts"`
	RetryCredits          float64            `json:"retry_credits"`
	RetryCreditsSpent     float64            `json:"retry_credits_spent"`
	RetryDenied           int                `json:"retry_denied"`
	ServedAfterRetry      int                `json:"served_after_retry"`
	UpstreamSeconds       PhasePair[float64] `json:"upstream_seconds"`
}

// AttemptFailure counts failed attempts of one phase for one reason.
type AttemptFailure struct {
	Count  int    `json:"count"`
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
}

// ControlSummary is /narwhal/state.control: the controller's counters.
type ControlSummary struct {
	Advisory      bool           `json:"advisory"`
	Decisions     map[string]int `json:"decisions"`
	FlipReversals int            `json:"flip_reversals"`
	Flips         map[string]int `json:"flips"`
	FlipsRefused  []FlipRefused  `json:"flips_refused"`
	LastDecision  *Decision      `json:"last_decision"`
}

// ThresholdState is /narwhal/state.thresholds, the controller's.
type ThresholdState struct {
	CooldownS          float64 `json:"cooldown_s"`
	DwellS             float64 `json:"dwell_s"`
	Expand             float64 `json:"expand"`
	PanicRatio         float64 `json:"panic_ratio"`
	Shrink             float64 `json:"shrink"`
	SustainedIntervals int     `json:"sustained_intervals"`
}

// SLOState is /narwhal/state.slo.
type SLOState struct {
	TPOTS float64 `json:"tpot_s"`
	TTFTS float64 `json:"ttft_s"`
}

// HealthState is /narwhal/state.health[iid]: the drift tracker.
type HealthState struct {
	Baseline        float64  `json:"baseline"`
	DriftingWindows int      `json:"drifting_windows"`
	LastScore       float64  `json:"last_score"`
	LastScoredSAgo  *float64 `json:"last_scored_s_ago"` // null before the first score
	PrefillPaused   bool     `json:"prefill_paused"`
	PrefillPauses   int      `json:"prefill_pauses"`
	Probation       bool     `json:"probation"`
	Scored          int      `json:"scored"`
	Undersampled    int      `json:"undersampled"`
	Vetoed          int      `json:"vetoed"`
}

// MonitoringState is /narwhal/state.monitoring.
type MonitoringState struct {
	CoreConsecutive int                        `json:"core_consecutive"`
	CoreFailures    int                        `json:"core_failures"`
	Degraded        bool                       `json:"degraded"`
	EventLoopLagS   float64                    `json:"event_loop_lag_s"`
	Reason          *string                    `json:"reason"` // null when healthy
	Stages          map[string]MonitoringStage `json:"stages"`
}

// MonitoringStage is one monitor-pass stage's failure counts.
type MonitoringStage struct {
	Consecutive int     `json:"consecutive"`
	Failures    int     `json:"failures"`
	LastAt      float64 `json:"last_at"`
	LastClass   string  `json:"last_class"`
}

// LifecycleDoc is the narwhal.lifecycle v1 document.
type LifecycleDoc struct {
	Schema              string                     `json:"schema"`
	SchemaVersion       int                        `json:"schema_version"`
	EngineRestartPolicy string                     `json:"engine_restart_policy"`
	Engines             map[string]LifecycleEngine `json:"engines"`
	Error               string                     `json:"error"`
	Events              []LifecycleEvent           `json:"events"`
	LifecycleBlocked    string                     `json:"lifecycle_blocked"`
	ProcessStarts       map[string]float64         `json:"process_starts"`
	Router              LifecycleRouter            `json:"router"`
	Wave                LifecycleWave              `json:"wave"`
}

// LifecycleEngine is /narwhal/lifecycle.engines[iid].
type LifecycleEngine struct {
	AcceptsNew      bool              `json:"accepts_new"`
	Checks          []lifecycle.Check `json:"checks"`
	DeadlineAt      *float64          `json:"deadline_at"`
	Draining        bool              `json:"draining"`
	Error           string            `json:"error"`
	Held            []lifecycle.Hold  `json:"held"`
	NewProcessStart *float64          `json:"new_process_start"`
	OldProcessStart *float64          `json:"old_process_start"`
	ReadyToStop     bool              `json:"ready_to_stop"`
	RequestedAt     *float64          `json:"requested_at"`
	Resident        PhasePair[int]    `json:"resident"`
	RestartRequired bool              `json:"restart_required"`
	State           lifecycle.State   `json:"state"`
	WaveID          string            `json:"wave_id"`
}

// LifecycleRouter is /narwhal/lifecycle.router.
type LifecycleRouter struct {
	ControlsFleet bool `json:"controls_fleet"`
	Ready         bool `json:"ready"`
}

// LifecycleWave is /narwhal/lifecycle.wave.
type LifecycleWave struct {
	Active      bool   `json:"active"`
	ID          string `json:"id"`
	ReadyToStop bool   `json:"ready_to_stop"`
}

// LifecycleEvent is one row of /narwhal/lifecycle.events: at and action,
// then the action's own fields at the same level (they differ per action,
// so they stay a map).
type LifecycleEvent lifecycle.Event

// Row is the event as one flat object; the handoff file keeps it so too.
func (e LifecycleEvent) Row() map[string]any {
	row := map[string]any{"at": e.At, "action": e.Action}
	for k, v := range e.Fields {
		row[k] = v
	}
	return row
}

// MarshalJSON flattens the action's fields beside at and action. HTML
// is not escaped here: the encoder that writes the document decides.
func (e LifecycleEvent) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e.Row()); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON takes at and action out of the row and keeps the rest as
// the action's fields.
func (e *LifecycleEvent) UnmarshalJSON(b []byte) error {
	var row map[string]any
	if err := json.Unmarshal(b, &row); err != nil {
		return err
	}
	at, _ := row["at"].(float64)
	action, _ := row["action"].(string)
	delete(row, "at")
	delete(row, "action")
	*e = LifecycleEvent{At: at, Action: action, Fields: row}
	return nil
}

// EvidenceState is /narwhal/state.evidence: each engine endpoint's output
// tier as the router's last evidence pass derived it from the store.
// Enabled is false when the router runs without an evidence store.
type EvidenceState struct {
	Enabled   bool                    `json:"enabled"`
	Endpoints map[string]EndpointTier `json:"endpoints"` // iid → tier
	Error     string                  `json:"error"`
	Request   *string                 `json:"decision_request"`
	UpdatedAt string                  `json:"updated_at"`
	// Journal is what the pass read of the router's journal; nil when
	// it reads none.
	Journal *EvidenceJournal `json:"journal,omitempty"`
}

// EvidenceJournal is the evidence pass's reading of the journal: it
// reads only the rows appended since its last pass, and skips torn rows
// (counted here, as a resume does) instead of stopping at them.
type EvidenceJournal struct {
	TornRows  int    `json:"torn_rows"`
	FirstTorn string `json:"first_torn,omitempty"` // file:line
	// PassBytes and PassRows are the last pass's new bytes and rows.
	PassBytes  int64 `json:"pass_bytes"`
	PassRows   int   `json:"pass_rows"`
	WindowRows int   `json:"window_rows"`
	// ServingError says why the last pass wrote no serving record ("" when
	// it did, or had nothing new to judge).
	ServingError string `json:"serving_error"`
}

// ProfilesState is /narwhal/state.profiles: the profile store the core
// prices with and the readmission gate binds to. The router re-reads
// Path when the file changes (and on POST /narwhal/profiles/reload);
// narwhal-profile --router compares Digest with the file it wrote.
type ProfilesState struct {
	Path     string `json:"path"`      // "" when the store was not loaded from a file
	Digest   string `json:"digest"`    // sha256 of the file's bytes when loaded
	LoadedAt string `json:"loaded_at"` // RFC 3339
	Reloads  int    `json:"reloads"`   // re-reads that changed the store
	// Error is why the last re-read was not taken ("" when it was, or
	// none was tried): the store before it stays in use.
	Error string `json:"error"`
}

// EndpointTier is one engine endpoint's tier and what the next one lacks.
type EndpointTier struct {
	Endpoint string   `json:"endpoint"`
	Missing  []string `json:"missing"`
	Tier     string   `json:"tier"`
}

// Health is GET /health's answer: process liveness, always 200, with the
// router's status word. Fields are in key order, as the map it replaced
// encoded them.
type Health struct {
	AvailableInstances int    `json:"available_instances"`
	Instances          int    `json:"instances"`
	Status             string `json:"status"`
}

// Ready is GET /ready's answer: 200 only when this router controls the
// fleet, knows its engines and has one live; 503 with the reason otherwise.
type Ready struct {
	ControlReady bool   `json:"control_ready"`
	Epoch        int    `json:"epoch"`
	Held         []Hold `json:"held"`
	Holder       string `json:"holder"`
	Reason       string `json:"reason"`
	// Standby is present only on a standby: whether it is warm.
	Standby *Standby `json:"standby,omitempty"`
	Status  string   `json:"status"`
}

// Standby is a standby router's view of its primary in /ready: a standby
// with good_probes 0 (or a stale handoff_at) has nothing to take over with.
type Standby struct {
	Primary    string  `json:"primary"`
	GoodProbes int64   `json:"good_probes"` // probes that returned a usable handoff since start
	Misses     int     `json:"misses"`      // consecutive misses now; a takeover needs 4
	LastMiss   string  `json:"last_miss"`   // why the last probe missed; "" after a good one
	HandoffAt  float64 `json:"handoff_at"`  // the last good handoff's at (Unix s); 0 before one
}
