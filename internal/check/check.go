// Package check is preflight (narwhal-check): the gates that prove, before
// the router admits traffic, that every engine is reachable, runs the
// declared build in the attested process, matches its profile, serves the
// model at its profiled pace, counts tokens, and can hand KV to every
// eligible peer with output identical to an aggregated run, on the
// accelerators the fleet declares. A contract or hardware failure stops
// preflight before any KV moves. Each run also yields
// evidence records (evidence.go).
package check

import (
	"context"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Gate names in the order they run.
const (
	GateReach    = "reach"
	GateContract = "contract"
	GateHardware = "hardware"
	GateProfile  = "profile"
	GateModel    = "model"
	GatePace     = "pace"
	GateTokenize = "tokenize"
	GateProduce  = "produce"
	GateConsume  = "consume"
	GateSLO      = "slo"
)

// Order is the gate order (operations reference §2.2, schema-1 era, with
// hardware after contract: it reads the verified attestation).
var Order = []string{GateReach, GateContract, GateHardware, GateProfile, GateModel, GatePace, GateTokenize, GateProduce, GateConsume, GateSLO}

// Status of one result line.
type Status string

// Line statuses.
const (
	OK   Status = "ok"
	Fail Status = "fail"
	Skip Status = "skip"
	Warn Status = "warn"
)

// Outcome of a whole gate.
type Outcome string

// Gate outcomes: any failing line fails the gate; a gate whose lines are
// all skips (or that has none) is skipped; otherwise it passed.
const (
	Passed  Outcome = "pass"
	Failed  Outcome = "fail"
	Skipped Outcome = "skip"
)

// Line is one result: what, on which engine (or pair), and why.
type Line struct {
	Status      Status `json:"status"`
	Engine      string `json:"engine,omitempty"`
	Message     string `json:"message"`
	FailureKind string `json:"failure_kind,omitempty"`
}

// Gate is one gate's result.
type Gate struct {
	Name    string  `json:"name"`
	Outcome Outcome `json:"outcome"`
	Lines   []Line  `json:"lines"`
}

func (g *Gate) add(s Status, engine, format string, args ...any) {
	g.Lines = append(g.Lines, Line{Status: s, Engine: engine, Message: sprintf(format, args...)})
}

func (g *Gate) settle() {
	g.Outcome = Skipped
	for _, l := range g.Lines {
		switch l.Status {
		case Fail:
			g.Outcome = Failed
			return
		case OK, Warn:
			g.Outcome = Passed
		}
	}
}

// Options configure one preflight run.
type Options struct {
	Fleet *fleet.Config
	// Profiles is the loaded profile store; nil with ProfilesErr set when it
	// could not be read (the profile gate reports it).
	Profiles    *profile.Store
	ProfilesErr error
	APIKey      string // engine Bearer credential; never sent to sidecars
	Ring        bool   // consume pairs by ring instead of full mesh
	Repeats     int    // probes per pair, clamped to ≥ 1
	NoKV        bool   // skip produce and consume
	Clock       ports.Clock
	IDs         ports.IDGenerator // cache salts; default random
	// PaceWords is the pace prompt length in words ("benchmark " × n);
	// default 4096, halved on HTTP 400 until it fits the context.
	PaceWords int
	// PaceTolerance: an engine is slow when its best time exceeds this
	// multiple of its profile's prefill_time(n) (or of the fleet median).
	PaceTolerance float64
	ProbeWords    int          // produce/consume/tokenize prompt words; default 64
	Sidecars      *http.Client // default: probe's direct client without credentials
	// Progress, when set, hears each gate as it starts: its name, its
	// index from 0, and the number of gates.
	Progress func(gate string, i, n int)
}

// Report is the outcome of a run.
type Report struct {
	Engines  int      `json:"engines"`
	Model    string   `json:"model"`
	TTFT     float64  `json:"ttft_s"`
	TPOT     float64  `json:"tpot_s"`
	Gates    []Gate   `json:"gates"`
	Failed   []string `json:"failed"`
	Skipped  []string `json:"skipped"`
	Warnings []string `json:"warnings"`
	// ServingVerified lists engines whose every KV probe passed.
	ServingVerified []string `json:"-"`
	// Engine facts the evidence records are built from.
	Attested map[string]*attest.Payload `json:"-"`
	Live     map[string]vllm.Identity   `json:"-"`
}

// Passed reports whether no gate failed.
func (r *Report) Passed() bool { return len(r.Failed) == 0 }

// Gate returns the named gate's result.
func (r *Report) Gate(name string) *Gate {
	for i := range r.Gates {
		if r.Gates[i].Name == name {
			return &r.Gates[i]
		}
	}
	return nil
}

func (o *Options) defaults() {
	if o.Repeats < 1 {
		o.Repeats = 1
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock()
	}
	if o.IDs == nil {
		o.IDs = ports.RandomIDs()
	}
	if o.PaceWords <= 0 {
		o.PaceWords = 4096
	}
	if !(o.PaceTolerance > 1) {
		o.PaceTolerance = 1.5
	}
	if o.ProbeWords <= 0 {
		o.ProbeWords = 64
	}
}

// Run runs every gate in order and returns the report. It never returns
// early: later gates skip with a reason instead, so the operator sees the
// whole picture.
func Run(ctx context.Context, o Options) *Report {
	o.defaults()
	r := newRun(o)
	defer r.close()
	steps := []struct {
		name string
		fn   func(context.Context, *Gate)
	}{{GateReach, r.reach}, {GateContract, r.contract}, {GateHardware, r.hardware}, {GateProfile, r.profile}, {GateModel, r.model},
		{GatePace, r.pace}, {GateTokenize, r.tokenize}, {GateProduce, r.produce}, {GateConsume, r.consume}, {GateSLO, r.slo}}
	rep := &Report{Engines: len(o.Fleet.Engines), Model: o.Fleet.Model, TTFT: o.Fleet.SLO.TTFT, TPOT: o.Fleet.SLO.TPOT,
		Attested: r.attested, Live: r.identity}
	for i, s := range steps {
		if o.Progress != nil {
			o.Progress(s.name, i, len(steps))
		}
		g := Gate{Name: s.name}
		s.fn(ctx, &g)
		g.settle()
		rep.Gates = append(rep.Gates, g)
	}
	rep.tally()
	rep.ServingVerified = r.servingVerified()
	return rep
}

func (r *Report) tally() {
	r.Failed, r.Skipped, r.Warnings = []string{}, []string{}, []string{}
	for _, g := range r.Gates {
		switch g.Outcome {
		case Failed:
			r.Failed = append(r.Failed, g.Name)
		case Skipped:
			r.Skipped = append(r.Skipped, g.Name)
		}
		for _, l := range g.Lines {
			if l.Status == Warn {
				r.Warnings = append(r.Warnings, g.Name+": "+l.Message)
			}
		}
	}
}
