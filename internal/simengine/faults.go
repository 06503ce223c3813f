package simengine

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/units"
)

// Faults are the misbehaviours an engine can be told to show, at start
// (Config.Faults, command flags) or at run time (SetFaults, the admin
// endpoint). The zero value is a healthy engine.
type Faults struct {
	// LatencyMultiplier scales every step's duration (0 and 1: none).
	LatencyMultiplier float64 `json:"latency_multiplier"`
	// HTTP500Rate is the probability that a completion request gets an
	// HTTP 500 InternalServerError instead of being served.
	HTTP500Rate float64 `json:"http_500_rate"`
	// RefuseConnections closes the HTTP listener (connection refused) and
	// cuts open connections, as a dead process does.
	RefuseConnections bool `json:"refuse_connections"`
	// DropAfterTokens > 0 cuts every stream's connection after that many
	// tokens, without [DONE].
	DropAfterTokens int `json:"drop_after_tokens"`
	// StallSeconds delays the next step by that long once: no tokens
	// for S seconds, then normal service.
	StallSeconds float64 `json:"stall_seconds"`
	// Unhealthy makes /health answer 503, as after EngineDeadError.
	Unhealthy bool `json:"unhealthy"`
	// CorruptKV flips bits in every KV block this engine serves to a
	// consumer, so the consumer's text differs from an aggregated run.
	CorruptKV bool `json:"corrupt_kv"`
	// JitterFraction > 0 spreads every step's duration uniformly over
	// ±that fraction (jitter.go).
	JitterFraction float64 `json:"jitter_fraction"`
}

func (f Faults) validate() error {
	switch {
	case f.LatencyMultiplier < 0:
		return fmt.Errorf("latency_multiplier must be ≥ 0, got %v", f.LatencyMultiplier)
	case f.HTTP500Rate < 0 || f.HTTP500Rate > 1:
		return fmt.Errorf("http_500_rate must be in [0, 1], got %v", f.HTTP500Rate)
	case f.DropAfterTokens < 0:
		return fmt.Errorf("drop_after_tokens must be ≥ 0, got %d", f.DropAfterTokens)
	case f.JitterFraction < 0 || f.JitterFraction >= 1:
		return fmt.Errorf("jitter_fraction must be in [0, 1), got %v", f.JitterFraction)
	case f.StallSeconds < 0:
		return fmt.Errorf("stall_seconds must be ≥ 0, got %v", f.StallSeconds)
	}
	return nil
}

// Faults returns the active faults.
func (e *Engine) Faults() Faults {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.faults
}

// SetFaults replaces the active faults. A StallSeconds > 0 arms one stall.
func (e *Engine) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("simengine faults: %w", err)
	}
	e.mu.Lock()
	prev := e.faults
	e.faults = f
	if f.StallSeconds > 0 {
		e.stallOnce = units.Seconds(f.StallSeconds)
	}
	var old *http.Server
	if f.RefuseConnections && !prev.RefuseConnections && e.srv != nil {
		old, e.srv = e.srv, nil
	}
	reopen := !f.RefuseConnections && prev.RefuseConnections && e.ctx.Err() == nil
	e.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	if reopen {
		l, err := net.Listen("tcp", e.httpAddr)
		if err != nil {
			return fmt.Errorf("simengine: reopen %s: %w", e.httpAddr, err)
		}
		e.mu.Lock()
		e.srv = e.newServer()
		e.serveOn(e.srv, l)
		e.mu.Unlock()
	}
	e.signal()
	return nil
}

// State is what the admin endpoint reports.
type State struct {
	EngineID    string  `json:"engine_id"`
	Generation  int     `json:"generation"`
	Running     int     `json:"running"`
	Waiting     int     `json:"waiting"`
	Leases      int     `json:"leases"`
	KVUsage     float64 `json:"kv_cache_usage"`
	Preemptions int     `json:"preemptions"`
	Faults      Faults  `json:"faults"`
}

// State reports the engine's scheduler and fault state.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.model.Stats()
	return State{EngineID: e.engineID, Generation: e.generation, Running: st.Running, Waiting: st.Waiting,
		Leases: len(e.leases), KVUsage: float64(st.UsedBlocks) / float64(st.TotalBlocks), Preemptions: st.Preemptions, Faults: e.faults}
}

// adminHandler serves the loopback fault API:
//
//	GET  /faults   current faults
//	POST /faults   merge the given fields into the current faults
//	POST /restart  simulate a process restart
//	GET  /state    engine id, generation, queue and KV state
func (e *Engine) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, e.Faults()) })
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		f := e.Faults()
		f.StallSeconds = 0 // a stall is one-shot; only a new value re-arms it
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			writeJSON(w, 400, map[string]string{"error": "bad faults body: " + err.Error()})
			return
		}
		if err := e.SetFaults(f); err != nil {
			writeJSON(w, 400, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, 200, e.Faults())
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, _ *http.Request) {
		e.Restart()
		writeJSON(w, 200, e.State())
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, e.State()) })
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = 500, []byte(`{"error":"encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
