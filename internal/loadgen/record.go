// Package loadgen is narwhal bench's load generator: an open-loop
// schedule (Poisson arrivals, a replayed simulator trace, or a sweep of
// rates) offered to a router by real streaming clients, each request
// timed on the client side and written as one JSON line.
//
// The schedule is fixed before the first request is sent: arrivals do
// not wait for earlier requests (open loop), so a slow fleet sees the
// load it would see in production instead of a politely reduced one. A
// request that finds the client's concurrency limit full is recorded as
// not sent (client_limit), never silently delayed.
package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Schema and SchemaVersion name the results file (docs/bench.md).
const (
	Schema        = "narwhal.bench"
	SchemaVersion = 1
)

// Outcomes of one offered request.
const (
	OutcomeCompleted      = "completed"       // [DONE] after the full output
	OutcomeHTTPError      = "http_error"      // a non-200 answer (refusals are 429s)
	OutcomeTimeout        = "timeout"         // the request timeout passed
	OutcomeTransportError = "transport_error" // connect or read failed
	OutcomeInvalidStream  = "invalid_stream"  // 200 but the stream was short or malformed
	OutcomeClientLimit    = "client_limit"    // not sent: the concurrency limit was full
	OutcomeNotSent        = "not_sent"        // not sent: the run's time bound ended or it was interrupted
)

// Header is the first line of a results file.
type Header struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Kind          string `json:"kind"` // "header"
	Run           string `json:"run"`
	Router        string `json:"router"`
	Model         string `json:"model"`
	// Started is the wall-clock UTC start (RFC 3339); every record's
	// scheduled_s and sent_s count from it.
	Started string  `json:"started"`
	Seed    uint64  `json:"seed"`
	Source  string  `json:"source"` // poisson, trace or sweep
	SLO     *SLO    `json:"slo"`    // the router's, from /narwhal/state; null when unknown
	Steps   []Step  `json:"steps"`
	LimitN  int     `json:"concurrency_limit"`
	BoundS  float64 `json:"bound_s"` // the whole run's time bound
}

// SLO is the router's latency target, as its fleet file states it.
type SLO = fleet.SLO

// Step is one offered rate of the run (a single step without a sweep).
type Step struct {
	Rate      float64 `json:"rate"` // offered req/s
	StartS    float64 `json:"start_s"`
	DurationS float64 `json:"duration_s"`
	Offered   int     `json:"offered"`
}

// Record is one offered request, written when it ends. ID is the
// X-Request-Id the bench sent: the journal's client_rid, the join key;
// RouterRID is the router's own rid (X-Narwhal-Request-Id).
type Record struct {
	Kind        string   `json:"kind"` // "request"
	ID          string   `json:"id"`
	RouterRID   string   `json:"router_rid,omitempty"`
	Step        int      `json:"step"`
	ScheduledS  float64  `json:"scheduled_s"`
	SentS       *float64 `json:"sent_s"`
	InputLen    int      `json:"input_len"`
	WantedLen   int      `json:"wanted_len"`
	OutputLen   int      `json:"output_len"`
	Outcome     string   `json:"outcome"`
	Status      int      `json:"status,omitempty"`
	ErrorCode   string   `json:"error_code,omitempty"`
	ErrorType   string   `json:"error_type,omitempty"`
	Error       string   `json:"error,omitempty"`
	TTFT        *float64 `json:"ttft_s"`
	TPOT        *float64 `json:"tpot_s"`
	E2E         *float64 `json:"e2e_s"`
	ScheduleLag float64  `json:"schedule_lag_s"`
	// Attempts is the HTTP attempts made, retries included (0: not sent).
	Attempts int `json:"attempts"`
}

// Refusal is how a record's refusal or error is counted: "429
// slo_refused", "503 no_engine", "timeout", ….
func (r *Record) Refusal() string {
	switch {
	case r.Outcome == OutcomeHTTPError && r.ErrorCode != "":
		return fmt.Sprintf("%d %s", r.Status, r.ErrorCode)
	case r.Outcome == OutcomeHTTPError:
		return fmt.Sprintf("%d", r.Status)
	}
	return r.Outcome
}

// sink writes records as JSON lines; safe for concurrent use.
type sink struct {
	mu  sync.Mutex // guards w and err
	w   io.Writer
	err error
}

func (s *sink) write(v any) {
	b, err := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.w == nil {
		return
	}
	if err == nil {
		_, err = s.w.Write(append(b, '\n'))
	}
	s.err = err
}
