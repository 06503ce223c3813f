package journal

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// RequestRow is the terminal request row of runtime.md §4.1, written once
// per original request when it settles. Pointer fields are nullable and
// render as null when nil; every field is always written so that readers
// never have to tell "absent" from "null". Times are seconds; Arrived is
// on the router's monotonic clock and compares only within one run.
type RequestRow struct {
	RID       string  `json:"rid"`
	ClientRID *string `json:"client_rid"`
	// ClientRIDBytes is the length of the client's id when client_rid was
	// cut to MaxClientRID bytes; nil when it was kept whole.
	ClientRIDBytes *int    `json:"client_rid_bytes"`
	Arrived        float64 `json:"arrived"`

	InputLen   int  `json:"input_len"`
	InputSized bool `json:"input_sized"`
	WantedLen  *int `json:"wanted_len"`
	OutputLen  *int `json:"output_len"`

	TTFT        *float64   `json:"ttft_s"`
	TPOT        *float64   `json:"tpot_s"`
	FirstByte   *float64   `json:"first_byte_s"`
	DecodeTPOT  *float64   `json:"decode_tpot_s"`
	QueueWait   float64    `json:"queue_wait_s"`
	QueueWaits  QueueWaits `json:"queue_waits"`
	Price       *Price     `json:"admission_price"`
	DurationS   float64    `json:"duration_s"`
	Attempts    int        `json:"attempts"`
	DecodeTries int        `json:"decode_attempts"`
	// AttemptFailures holds at most serving.max_attempts entries; nil is
	// written as [].
	AttemptFailures []AttemptFailure `json:"attempt_failures"`

	DecodeTokensObserved int             `json:"decode_tokens_observed"`
	UpstreamSeconds      UpstreamSeconds `json:"upstream_seconds"`

	PrefillIID     *string         `json:"prefill_iid"`
	DecodeIID      *string         `json:"decode_iid"`
	Crossed        *bool           `json:"crossed"`
	CachedTokens   map[string]int  `json:"cached_tokens"`
	CachePlacement *CachePlacement `json:"cache_placement"`
	// TokenAccounting is TokenIDs or TokenUnavailable; "" is written as
	// the writer's default.
	TokenAccounting string `json:"token_accounting"`

	Error     *string `json:"error"`
	Status    *int    `json:"status"`
	ErrorType *string `json:"error_type"`
	ErrorCode *string `json:"error_code"`
	Reason    *string `json:"reason"`
	Terminal  string  `json:"terminal"`

	Cancelled       bool    `json:"cancelled"`
	CancelledPhase  *string `json:"cancelled_phase"`
	Refused         bool    `json:"refused"`
	Rejected        bool    `json:"rejected"`
	Expired         bool    `json:"expired"`
	RefusedCause    *string `json:"refused_cause"`
	ReadinessReason *string `json:"readiness_reason"`
	// TraceID is the W3C trace id (32 lowercase hex) the router's legs
	// carried in traceparent: the client's, or one the router started.
	TraceID *string `json:"trace_id"`
}

// QueueWaits is the per-stage wait in seconds; 0 for a stage not reached.
type QueueWaits struct {
	Admission float64 `json:"admission"`
	Prefill   float64 `json:"prefill"`
	Decode    float64 `json:"decode"`
}

// UpstreamSeconds is the summed HTTP leg time per phase, failed legs
// included (not GPU time).
type UpstreamSeconds struct {
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

// Price is the latest prefill admission price and its parts (§1.7.2).
type Price struct {
	PriceS      float64 `json:"price_s"`
	ElapsedS    float64 `json:"elapsed_s"`
	BacklogS    float64 `json:"backlog_s"`
	OwnPrefillS float64 `json:"own_prefill_s"`
}

// CachePlacement is the warm-cache placement evidence of §2.3.
type CachePlacement struct {
	PlacedIID          string  `json:"placed_iid"`
	PlacedCachedTokens int     `json:"placed_cached_tokens"`
	EvidenceSequence   int64   `json:"evidence_sequence"`
	PredictedPrefillS  float64 `json:"predicted_prefill_s"`
	ColdPrefillS       float64 `json:"cold_prefill_s"`
	ColdChoiceIID      string  `json:"cold_choice_iid"`
}

// AttemptFailure is one entry of attempt_failures (§1.15). At is on the
// monotonic clock; ErrorMessage is cut to MaxErrorMessage characters on
// write.
type AttemptFailure struct {
	At             float64      `json:"at"`
	Attempt        int          `json:"attempt"`
	Phase          fault.Phase  `json:"phase"`
	Reason         fault.Reason `json:"reason"`
	PrefillIID     *string      `json:"prefill_iid"`
	DecodeIID      *string      `json:"decode_iid"`
	ErrorType      *string      `json:"error_type"`
	ErrorMessage   string       `json:"error_message"`
	Status         *int         `json:"status"`
	Transient      bool         `json:"transient"`
	OutputStarted  bool         `json:"output_started"`
	RetryScheduled bool         `json:"retry_scheduled"`
	BackoffS       *float64     `json:"backoff_s"`
	RetryReason    string       `json:"retry_reason"`
}

// MaxErrorMessage bounds attempt_failures[].error_message, in characters.
const MaxErrorMessage = 240

// Bounds of what a client's request can put in a row, so that one request
// writes a bounded row whatever it sends. MaxClientRID is in bytes, as the
// router's echo of X-Request-Id (httpguard.Echoable); MaxError, in
// characters, bounds error (whose detail may quote the client's input).
const (
	MaxClientRID = 256
	MaxError     = 1024
)

// capClientRID cuts id to at most MaxClientRID bytes, on a character
// boundary, and returns its original length when it cut.
func capClientRID(id *string) (*string, *int) {
	if id == nil || len(*id) <= MaxClientRID {
		return id, nil
	}
	n := MaxClientRID
	for n > 0 && !utf8.RuneStart((*id)[n]) {
		n--
	}
	return Ptr((*id)[:n]), Ptr(len(*id))
}

// Ptr returns a pointer to v, for the nullable fields.
func Ptr[T any](v T) *T { return &v }

// Validate checks the row's outcome fields against §1.17 and §4.1: a
// known terminal, a reason that belongs to it, and the flags that must
// match it. The writer refuses invalid rows so that a journal never holds
// a row a scorer would misread.
func (r *RequestRow) Validate() error {
	if r.RID == "" {
		return fmt.Errorf("journal row: empty rid; every request row needs the router request id")
	}
	if !slices.Contains(TerminalValues(), r.Terminal) {
		return fmt.Errorf("journal row %s: unknown terminal %q; use one of %v", r.RID, r.Terminal, TerminalValues())
	}
	if err := r.validateReason(); err != nil {
		return err
	}
	if err := r.validateFlags(); err != nil {
		return err
	}
	if err := r.validateRefusedCause(); err != nil {
		return err
	}
	switch r.TokenAccounting {
	case "", TokenIDs, TokenUnavailable:
	default:
		return fmt.Errorf("journal row %s: token_accounting %q; use %q or %q", r.RID, r.TokenAccounting, TokenIDs, TokenUnavailable)
	}
	return nil
}

func (r *RequestRow) validateReason() error {
	allowed := reasonsOf(r.Terminal)
	switch {
	case allowed == nil && r.Reason != nil:
		return fmt.Errorf("journal row %s: terminal %s carries reason %q; its reason must be null", r.RID, r.Terminal, *r.Reason)
	case allowed != nil && r.Reason == nil:
		return fmt.Errorf("journal row %s: terminal %s needs a reason, one of %v", r.RID, r.Terminal, allowed)
	case allowed != nil && !slices.Contains(allowed, *r.Reason):
		return fmt.Errorf("journal row %s: terminal %s has unknown reason %q; use one of %v", r.RID, r.Terminal, *r.Reason, allowed)
	}
	return nil
}

func (r *RequestRow) validateFlags() error {
	flags := []struct {
		name     string
		set      bool
		terminal string
	}{
		{"cancelled", r.Cancelled, TerminalCancelled},
		{"refused", r.Refused, TerminalRefused},
		{"rejected", r.Rejected, TerminalRejected},
		{"expired", r.Expired, TerminalExpired},
	}
	for _, f := range flags {
		if f.set != (r.Terminal == f.terminal) {
			return fmt.Errorf("journal row %s: %s is %v but terminal is %s; the flag must be true exactly for terminal %s",
				r.RID, f.name, f.set, r.Terminal, f.terminal)
		}
	}
	return nil
}

// RefusedCauseOf maps a refusal reason to the journal's refused_cause:
// the three decode-check causes collapse into CauseDecode (§1.7.2).
func RefusedCauseOf(reason string) string {
	switch reason {
	case CauseSlotWait, CauseKVCapacity, CauseTPOT:
		return CauseDecode
	}
	return reason
}

func (r *RequestRow) validateRefusedCause() error {
	switch {
	case r.Terminal != TerminalRefused && r.RefusedCause != nil:
		return fmt.Errorf("journal row %s: refused_cause %q on terminal %s; only refused rows carry one", r.RID, *r.RefusedCause, r.Terminal)
	case r.Terminal == TerminalRefused && (r.RefusedCause == nil || *r.RefusedCause != RefusedCauseOf(*r.Reason)):
		return fmt.Errorf("journal row %s: refused row with reason %q needs refused_cause %q", r.RID, *r.Reason, RefusedCauseOf(*r.Reason))
	}
	return nil
}

// normalized returns a copy of r ready to write: the outcome flags and
// refused_cause derived from the terminal and reason, the writer's token
// accounting when unset, [] for no failures, error messages cut to
// MaxErrorMessage characters, client_rid and error cut to their bounds.
// The caller's row is not modified.
func (r *RequestRow) normalized(tokenAccounting string) *RequestRow {
	c := *r
	c.Cancelled = c.Cancelled || c.Terminal == TerminalCancelled
	c.Refused = c.Refused || c.Terminal == TerminalRefused
	c.Rejected = c.Rejected || c.Terminal == TerminalRejected
	c.Expired = c.Expired || c.Terminal == TerminalExpired
	if c.Terminal == TerminalRefused && c.RefusedCause == nil && c.Reason != nil {
		c.RefusedCause = Ptr(RefusedCauseOf(*c.Reason))
	}
	if c.TokenAccounting == "" {
		c.TokenAccounting = tokenAccounting
	}
	if c.ClientRIDBytes == nil {
		c.ClientRID, c.ClientRIDBytes = capClientRID(c.ClientRID)
	}
	if c.Error != nil && len(*c.Error) > MaxError {
		c.Error = Ptr(truncateRunes(*c.Error, MaxError))
	}
	c.AttemptFailures = make([]AttemptFailure, len(r.AttemptFailures))
	for i, f := range r.AttemptFailures {
		f.ErrorMessage = truncateRunes(f.ErrorMessage, MaxErrorMessage)
		c.AttemptFailures[i] = f
	}
	return &c
}

func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
