// Package avail is the availability supervisor: it owns the breaker's
// verdicts, ejection and quarantine, holds, drift probation, readmission
// (probes and the lifecycle gates), the whole-wave hold and liveness
// sweeps. It is the only writer of liveness into the scheduling core.
//
// lifecycle holds the state and the rules; avail acts on them: it runs
// the probes (through Probes), publishes who may take placements
// (through Core), journals and exports each transition, and tells the
// router when the handoff document changed (StateChanged, which must not
// block: the router writes the file on its own goroutine).
//
// The request path talks to it through LegSucceeded, LegFailed and
// Usable; the monitor loop through MonitorPass; operators through
// Handler.
package avail

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Core is the scheduling core as the supervisor sees it. The router
// implements it, each call under its core mutex; nothing else writes
// liveness or probation into the core.
type Core interface {
	// SetLive publishes which engines may take new placements (every
	// configured engine has an entry).
	SetLive(live map[string]bool)
	// SetProbation puts the drift penalty on iid's prices, or lifts it.
	SetProbation(iid string, on bool)
	// Snapshot is the core's state now.
	Snapshot() *sched.Snapshot
	// DecodePace is each engine's decode pace over the interval closing
	// at now (router seconds).
	DecodePace(now float64) []sched.Pace
}

// Probes are the engine checks the supervisor runs. Each call is bounded
// by the implementation's own timeouts.
type Probes interface {
	// Health is GET /health (unauthenticated in vLLM).
	Health(ctx context.Context, iid string) error
	// Credential asks an authenticated route whether the engine accepts
	// the router's credential; only a 401/403 is its verdict.
	Credential(ctx context.Context, iid string) error
	// Inference asks the engine for two tokens directly.
	Inference(ctx context.Context, iid string) error
	// Stream asks for a stream that must reach [DONE] with all its tokens.
	Stream(ctx context.Context, iid string) error
	// Identity reads the engine's version and process start.
	Identity(ctx context.Context, iid string) (vllm.Identity, error)
	// Attestation verifies the engine's sidecar against the contract and
	// returns the verified attestation digest (the profile generation
	// binds it).
	Attestation(ctx context.Context, iid string) (string, error)
	// AttestationDigest verifies the engine's sidecar for the live
	// identity id and returns the attestation digest (for the profile
	// generation).
	AttestationDigest(ctx context.Context, iid string, id vllm.Identity) (string, error)
	// Model checks the engine serves the fleet's model.
	Model(ctx context.Context, iid string) error
	// Transfer moves KV from iid to peer and decodes there.
	Transfer(ctx context.Context, iid, peer string) error
}

// Status is what the lifecycle document reports of the router.
type Status interface {
	ControlsFleet() bool
	Ready() bool
}

// Config is what a supervisor needs. Journal and Metrics may be nil
// only in tests that do not read them (Metrics is required by the
// router).
type Config struct {
	Fleet   *fleet.Config
	Log     *slog.Logger
	Clock   ports.Clock
	Epoch   time.Time // the router's time origin: router seconds count from here
	Journal *journal.Writer
	Metrics *metrics.Metrics
	Core    Core
	Probes  Probes
	Status  Status
	// Generations is each loaded profile row's generation_digest by iid
	// (rows without one are absent); read-only.
	Generations map[string]string
	// StateChanged is called after every change the handoff document
	// records. It must return at once: it is called on request goroutines.
	StateChanged func()
	// Context bounds every probe the supervisor runs; it ends when the
	// router closes. Go runs a function on it in the background (the
	// router's goroutine accounting, which Close waits for).
	Context context.Context
	Go      func(f func(ctx context.Context))
	// Reply writes a JSON document: the router's one encoding of its
	// documents, for the lifecycle routes.
	Reply func(w http.ResponseWriter, status int, v any)
}

// View is the lifecycle state the router reads (handoff, state
// documents, metrics); writes go through the supervisor.
type View interface {
	Ejected() map[string]string
	Suspect(iid string) bool
	Quarantined() []string
	NextRelease(now, pass float64) (float64, bool)
	Holds() []lifecycle.Hold
	Held() []string
	Records() []lifecycle.Record
	Events() []lifecycle.Event
	ProcessStarts() map[string]float64
	Streaks() map[string]map[lifecycle.Class]int
}

// Supervisor is the availability supervisor of one fleet.
type Supervisor struct {
	cfg     *fleet.Config
	log     *slog.Logger
	clock   ports.Clock
	epoch   time.Time
	journal *journal.Writer
	metrics *metrics.Metrics
	core    Core
	probes  Probes
	status  Status
	changed func()
	reply   func(w http.ResponseWriter, status int, v any)
	// gens is each loaded profile row's generation_digest by iid; the
	// map is never written, a re-read profile store swaps in a new one
	// (SetGenerations), so gates read it without a lock.
	gens atomic.Pointer[map[string]string]

	life  *lifecycle.Manager // no lock of its own: under pub.mu, through lf
	lf    lockedLife
	drift *lifecycle.Drift // decode pace health: probation and eviction (drift.go); the monitor goroutine's
	// driftSeen is the drift tracker's published snapshot, for readers
	// off the monitor goroutine.
	driftSeen atomic.Pointer[driftView]
	order     []string // iids, sorted

	pub  publication                     // avail's one mutex and what it guards (publish.go)
	live atomic.Pointer[map[string]bool] // the liveness last published into the core; never written after

	verifying  sync.Map // iid → true while a verification probe runs
	holdLen    sync.Map // iid → seconds of its last timed hold, for the journal
	passes     int      // monitor passes, for the probe cadences; the monitor goroutine's alone
	wave       waveHold
	mon        monitoring
	jobs       probeJobs    // the monitor pass's probes in flight (rounds.go)
	legs       chan Failure // failed legs for the leg goroutine (legs.go)
	inlineLegs atomic.Int64 // failed legs a full queue left to their request
	verified   atomic.Int64 // breaker verifications ended
	ctx        context.Context
	goBg       func(f func(ctx context.Context))
}

// SetGenerations replaces the generation digests the profile-generation
// gate compares with (a re-read profile store): an engine excluded for
// a stale row passes at its next readmission probe once its new row is
// here. gens is not written after the call.
func (s *Supervisor) SetGenerations(gens map[string]string) {
	if gens == nil {
		gens = map[string]string{}
	}
	s.gens.Store(&gens)
}

// New builds the supervisor with every engine live and publishes that
// into the core.
func New(c Config) *Supervisor {
	s := &Supervisor{cfg: c.Fleet, log: c.Log, clock: c.Clock, epoch: c.Epoch, journal: c.Journal,
		metrics: c.Metrics, core: c.Core, probes: c.Probes, status: c.Status, changed: c.StateChanged, reply: c.Reply,
		ctx: c.Context, goBg: c.Go,
		life: lifecycle.New(c.Fleet)}
	s.lf = lockedLife{p: &s.pub, m: s.life, now: s.now}
	s.SetGenerations(c.Generations)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.changed == nil {
		s.changed = func() {}
	}
	if s.ctx == nil {
		s.ctx = context.Background()
	}
	if s.goBg == nil {
		s.goBg = func(f func(ctx context.Context)) { go f(s.ctx) }
	}
	s.order = c.Fleet.IIDs()
	s.jobs = newProbeJobs(s.order)
	s.legs = make(chan Failure, legQueue)
	s.drift = lifecycle.NewDrift(c.Fleet.Recovery.Health, s.order)
	s.publishDrift()
	s.publishLive()
	legs := s.legs
	s.goBg(func(ctx context.Context) { s.legLoop(ctx, legs) })
	return s
}

// View is the lifecycle state, read-only.
func (s *Supervisor) View() View { return s.lf }

// Usable reports whether iid may take new placements: the liveness the
// supervisor last published into the core.
func (s *Supervisor) Usable(iid string) bool { return (*s.live.Load())[iid] }

// LiveCount is how many engines may take new placements.
func (s *Supervisor) LiveCount() int {
	n := 0
	for _, live := range *s.live.Load() {
		if live {
			n++
		}
	}
	return n
}

// now is router seconds: the core's and the journal's time scale.
func (s *Supervisor) now() float64 { return s.clock.Now().Sub(s.epoch).Seconds() }

// wallNow is wall-clock Unix seconds, for lifecycle records and events.
func (s *Supervisor) wallNow() float64 { return float64(s.clock.Now().UnixMicro()) / 1e6 }

// ForEach runs f for every iid concurrently and waits: the fan-out of
// every probe round (the router's model-limit refresh uses it too).
func ForEach(ctx context.Context, iids []string, f func(ctx context.Context, iid string)) {
	var wg sync.WaitGroup
	for _, iid := range iids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, iid)
		}()
	}
	wg.Wait()
}
