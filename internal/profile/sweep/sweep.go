// Package sweep measures one engine for narwhal-profile (operations.md
// §6.1): exactly tokenised prompts, the cold prefill sweep, the decode
// cohorts, the optional warm-prefill sweep and the KV capacity, bracketed
// by two reads of the engine's generation. It talks to the engine only
// through internal/vllm, reads the engine's health, identity and
// attestation through internal/probe (the probes preflight and
// readmission use), and fits with internal/profile/fit; the command owns
// files, flags and the terminal.
package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/fit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Config is the sweep every engine gets.
type Config struct {
	PrefillLengths []int
	PrefillRepeats int
	DecodeLengths  []int
	Concurrency    []int
	DecodeTokens   int
	Warm           bool
	WarmPrefixes   []int
	WarmSuffixes   []int
	// MaxNumSeqs > 0 caps every concurrency point (--limits): the sweep
	// never has more streams open on the engine.
	MaxNumSeqs int
	Limits     profile.Limits
	// Timeout bounds one observation (a completion or a cohort).
	Timeout time.Duration
	// runTag, when set, replaces the run's random tag: tests that need
	// two runs to send the same prompts set it.
	runTag string
}

// Target is one engine to measure.
type Target struct {
	IID      string
	Model    string
	Client   *vllm.Client
	Contract *fleet.EngineContract // nil: bind to the process identity
	// Probes reads the engine's health, identity and (with a contract) its
	// attestation, as preflight and readmission do: one fleet's prober,
	// whose clients include Client under IID. Nil: a prober over Client
	// alone, with no bounds and no sidecar (Contract must then be nil).
	Probes *probe.Prober
}

// prober is t.Probes, or one over t.Client alone.
func (t Target) prober() *probe.Prober {
	if t.Probes != nil {
		return t.Probes
	}
	cfg := &fleet.Config{Engines: []fleet.Engine{{IID: t.IID}}}
	return probe.New(cfg, probe.Options{Clients: func(string) *vllm.Client { return t.Client }})
}

// Progress reports done of total steps of one engine's phase.
type Progress func(iid, phase string, done, total int)

// Phases, in the order a sweep runs them.
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseWarm    = "warm"
)

// Result is one engine's outcome: a row to store, or the error that
// refused it. Samples holds every raw measurement either way.
type Result struct {
	Row     *profile.Row
	Samples *Samples
	Err     error
}

// Run measures t. Cancel ctx to stop between observations.
func Run(ctx context.Context, t Target, cfg Config, progress Progress) Result {
	if progress == nil {
		progress = func(string, string, int, int) {}
	}
	s := &Samples{IID: t.IID, Config: cfg.record()}
	m := &meter{t: t, cfg: cfg, s: s, progress: progress, tag: cfg.runTag, probes: t.prober()}
	if m.tag == "" {
		m.tag = runTag()
	}
	start := time.Now()
	row, err := m.run(ctx)
	s.Elapsed = secondsSince(start)
	if err != nil {
		s.Error = err.Error()
		return Result{Samples: s, Err: fmt.Errorf("%s: %w", t.IID, err)}
	}
	s.Profile = row
	return Result{Row: row, Samples: s}
}

// meter is one engine's sweep in progress.
type meter struct {
	t        Target
	probes   *probe.Prober
	cfg      Config
	s        *Samples
	progress Progress
	prompts  *prompter
	plan     plan
	// tag is this run's word in every prompt's first block, so a second
	// run against the same engine (a --merge re-run, make run's resweep)
	// sends prompts no earlier run sent and a prefix cache cannot serve
	// them from the first run's.
	tag string
}

// lead is the start of one measurement's prompt: the run's tag, then what
// the measurement names.
func (m *meter) lead(format string, args ...any) string {
	return "narwhal-profile " + m.tag + " " + fmt.Sprintf(format, args...)
}

// runTag is a short random word naming one run.
func runTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "run" + hex.EncodeToString(b[:])
}

func (m *meter) run(ctx context.Context) (*profile.Row, error) {
	if e := m.probes.Health(ctx, m.t.IID); e != nil {
		return nil, fmt.Errorf("/health: %s (start the engine or fix its url)", fault.Detail(e))
	}
	before, err := m.generation(ctx)
	if err != nil {
		return nil, err
	}
	m.s.Before = before
	fits, measureErr := m.measure(ctx)
	after, err := m.generation(ctx)
	if err == nil && after.Digest != before.Digest {
		m.s.After = after
		return nil, fmt.Errorf("the engine restarted during its sweep (generation %s before, %s after); its measurements span two processes — re-run narwhal-profile --engines %s",
			before.Digest, after.Digest, m.t.IID)
	}
	if measureErr != nil {
		return nil, measureErr
	}
	if err != nil {
		return nil, fmt.Errorf("after the sweep: %w", err)
	}
	m.s.After = after
	return m.row(fits.prefill, fits.decode, fits.warm, before.Digest)
}

// fits are one engine's accepted fits.
type fits struct {
	prefill fit.Prefill
	decode  fit.Decode
	warm    *fit.Warm
}

// measure runs the phases in order; the first failure ends the sweep.
func (m *meter) measure(ctx context.Context) (fits, error) {
	var f fits
	var err error
	if err = m.prepare(ctx); err != nil {
		return f, err
	}
	if f.prefill, err = m.coldPrefill(ctx); err != nil {
		return f, err
	}
	if f.decode, err = m.decode(ctx); err != nil {
		return f, err
	}
	if m.cfg.Warm {
		f.warm, err = m.warm(ctx, f.prefill)
	}
	return f, err
}
