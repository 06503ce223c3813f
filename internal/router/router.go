// Package router is narwhal's HTTP serving: the OpenAI-compatible ingress,
// admission, the two legs of every request (prefill on one engine, decode
// on another, with the KV handed over through vLLM's kv_transfer_params),
// streaming back to the client, retries, the journal row each request
// ends in, and the control routes.
//
// The router owns the goroutines, the HTTP and the clock; placement and
// load decisions are sched's. Calls into the scheduling core are
// serialised by one mutex (each is microseconds).
package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/enginelimits"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/saturation"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/takeover"
	"github.com/narwhal-go/narwhal/internal/tracing"
	"github.com/narwhal-go/narwhal/internal/ui"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Options are what a router needs besides the fleet and its profiles.
// Zero values take production defaults.
type Options struct {
	// Profiles is the file the profile store was loaded from: the router
	// re-reads it when it changes (zero: never).
	Profiles ProfileSource
	// EngineTransport is vllm.TransportH1 ("" too) or
	// vllm.TransportNetHTTP: the HTTP/1.1 client of the engine legs.
	EngineTransport string
	Logger          *slog.Logger
	Clock           ports.Clock
	IDs             ports.IDGenerator
	Rng             ports.Rng // backoff jitter
	Journal         *journal.Writer
	// MaxConcurrent overrides serving.max_connections as the admission
	// limit (1 ≤ n ≤ max_connections); 0 keeps the fleet's value.
	MaxConcurrent int
	// Lookup reads the engine credential variable; os.LookupEnv if nil.
	Lookup fleet.LookupFunc
	// AdminToken protects the lifecycle actions (drain, readmit). Empty
	// means none is configured: AdminOpen then says whether they are
	// allowed anyway (true only when the router binds loopback).
	AdminToken string
	AdminOpen  bool
	// HA configures the handoff document, resume, the lease and standby.
	HA HA
	// HTTP bounds what one client connection may hold (body reads, idle
	// keep-alives); zero fields take the documented defaults.
	HTTP httpguard.Options
	// Evidence turns on the evidence pass (internal/evidence/tierd).
	Evidence EvidenceOptions
	// Tracer records router spans (internal/tracing); nil passes
	// traceparent on to the engines and records nothing.
	Tracer *tracing.Tracer
	// APIKeys are the client keys /v1/* accepts (clientgate.go); empty
	// leaves client authentication to the ingress in front.
	APIKeys []string
	// Hosts are the Host headers the router answers on every route (the
	// DNS-rebinding guard, httpguard.HostGuard); the zero value answers
	// any.
	Hosts httpguard.HostGuard
}

// EvidenceOptions turn on the evidence pass (tierd.Options).
type EvidenceOptions = tierd.Options

// engine is one configured engine as the router talks to it.
type engine struct {
	iid    string
	client *vllm.Client
}

// Router serves one fleet.
type Router struct {
	cfg     *fleet.Config
	log     *slog.Logger
	clock   ports.Clock
	ids     ports.IDGenerator
	journal *journal.Writer
	metrics *metrics.Metrics
	epoch   time.Time
	limit   int

	engines map[string]*engine
	order   []string // iids, sorted

	// mu guards core, stats (with the retry credits), rng, freed and
	// waiting (with each waiter's placement): one of
	// the two locks a request takes (the other is the journal writer's,
	// docs/router.md "Locks on the request path"). It is taken only by
	// locked; what runs under it is short, never blocks, and never calls
	// into avail (coreSide says why).
	mu    sync.Mutex
	core  *sched.Core
	freed chan struct{} // closed (and replaced) whenever a phase seat frees
	// waiting are the calls in the core's deadline queue, by rid; queued
	// is serveQueueLocked's scratch (queue.go).
	waiting map[string]*call
	queued  []string
	stats   routerdoc.Counts
	rng     ports.Rng

	retained atomic.Int64 // completion requests from arrival to response end
	seats    chan struct{}
	closing  atomic.Bool
	started  atomic.Bool
	inflight sync.WaitGroup

	// av is the availability supervisor: breaker, holds, drift, waves,
	// readmission, and the only writer of liveness into core.
	av         *avail.Supervisor
	life       avail.View    // the lifecycle state, read-only (writes go through av)
	probe      *probe.Prober // engine checks, one client policy and set of bounds (probes.go)
	adminToken string
	adminOpen  bool
	hosts      httpguard.HostGuard // which Host headers reach any route
	identities atomic.Bool

	ha       *takeover.HA        // lease, standby, handoff document, crash accounting
	sat      *saturation.Monitor // loop lag and sizing delay: lock-free on the request path
	httpOpts httpguard.Options   // with defaults applied
	reads    httpguard.BodyReads // completion bodies being read, per client
	models   enginelimits.Limits // the engines' max_model_len
	evidence *tierd.Runner       // the evidence pass and its last tiers
	profiles *profileWatch       // the profile store's file, re-read when it changes
	// engineTransport is Options.EngineTransport, for addEngines.
	engineTransport string

	cache    *residency.Tracker // prefix-cache residency per engine (cache.go); nil: every prefill priced cold
	bg       sync.WaitGroup     // background probes
	bgCtx    context.Context
	bgCancel context.CancelFunc

	tracer *tracing.Tracer // W3C trace context and optional span export (tracing.go)
	ui     *ui.Hub         // the live dashboard (dashboard.go)

	mux    *http.ServeMux
	gate   clientGate   // client keys and CORS of /v1/* (clientgate.go)
	front  http.Handler // mux behind gate
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// New builds a router for a validated fleet and its profile store, which
// must cover exactly the configured engines.
func New(cfg *fleet.Config, profiles *profile.Store, o Options) (*Router, error) {
	if err := checkProfiles(cfg, profiles); err != nil {
		return nil, err
	}
	o = withDefaults(o)
	limit := cfg.Serving.MaxConnections
	if o.MaxConcurrent != 0 {
		if o.MaxConcurrent < 1 || o.MaxConcurrent > limit {
			return nil, fmt.Errorf("--max-concurrent %d must be between 1 and serving.max_connections %d", o.MaxConcurrent, limit)
		}
		limit = o.MaxConcurrent
	}
	key, err := cfg.Engine.APIKey(o.Lookup)
	if err != nil {
		return nil, err
	}
	if err := vllm.CheckTransport(o.EngineTransport); err != nil {
		return nil, err
	}
	core, err := sched.New(cfg, profiles)
	if err != nil {
		return nil, err
	}
	r := &Router{
		cfg: cfg, log: o.Logger, clock: o.Clock, ids: o.IDs, rng: o.Rng, journal: o.Journal,
		metrics: metrics.New(cfg), epoch: o.Clock.Now(), limit: limit, core: core,
		engines: map[string]*engine{}, seats: make(chan struct{}, limit),
		stop: make(chan struct{}), done: make(chan struct{}), freed: make(chan struct{}), waiting: map[string]*call{},
		adminToken: o.AdminToken, adminOpen: o.AdminOpen, hosts: o.Hosts,
		httpOpts: o.HTTP.WithDefaults(), tracer: o.Tracer, gate: newClientGate(o.APIKeys, cfg.Serving.CORSOrigins),
		sat:             saturation.New(o.Clock, units.Seconds(cfg.SLO.SaturationThreshold())),
		engineTransport: o.EngineTransport,
	}
	r.bgCtx, r.bgCancel = context.WithCancel(context.Background())
	r.stats.Credits = float64(cfg.Serving.RetryBudget)
	r.metrics.RouterReady.Set(1)
	r.metrics.AdmissionInflightLimit.Set(float64(limit))
	r.metrics.HTTPRetainedLimit.Set(float64(limit + cfg.Serving.QueueCapacity))
	r.addEngines(key)
	r.cache = residency.ForFleet(cfg)
	r.probe = r.newProber()
	r.av = avail.New(avail.Config{Fleet: cfg, Log: r.log, Clock: r.clock, Epoch: r.epoch, Journal: r.journal,
		Metrics: r.metrics, Core: coreSide{r}, Probes: avail.FleetProbes{Prober: r.probe, Fleet: cfg, Cards: r.noteCards}, Status: status{r}, Generations: profiles.Generations(),
		StateChanged: r.stateChanged, Reply: writeJSON, Context: r.bgCtx, Go: r.background})
	r.life = r.av.View()
	r.profiles = newProfileWatch(o.Profiles, profiles, r.clock.Now())
	r.evidence = tierd.NewRunner(o.Evidence, tierd.Host{Fleet: cfg, JournalPath: o.Journal.Path(), Clock: r.clock, Log: r.log,
		SetTier: r.metrics.SetEndpointTier})
	if err := r.attach(o.HA); err != nil {
		r.bgCancel() // ends the goroutines avail.New started
		return nil, err
	}
	return r, nil
}

// attach builds the HA side and the routes, and resumes when asked.
func (r *Router) attach(ha HA) error {
	var err error
	if r.ha, err = r.newHA(ha); err != nil {
		return err
	}
	r.routes()
	if ha.Resume {
		return r.ha.Resume()
	}
	return nil
}

// addEngines makes a client per configured engine, all with the engine
// credential key.
func (r *Router) addEngines(key string) {
	cfg := r.cfg
	for _, e := range cfg.Engines {
		r.engines[e.IID] = &engine{iid: e.IID, client: vllm.NewClient(e.URL, vllm.Options{
			APIKey:         key,
			ConnectTimeout: units.Seconds(cfg.Engine.ConnectTimeoutS),
			MaxConns:       cfg.Serving.MaxConnections,
			IdleConns:      max(1, cfg.Serving.MaxConnections/2),
			MaxResponse:    int64(cfg.Serving.MaxResponseBytes),
			Transport:      r.engineTransport,
		})}
	}
	r.order = cfg.IIDs()
}

// newProber builds the router's engine checks (internal/probe) over its
// engine clients: one client policy and set of bounds.
func (r *Router) newProber() *probe.Prober {
	return probe.New(r.cfg, probe.Options{IDs: r.ids,
		Clients: func(iid string) *vllm.Client { return r.engines[iid].client }})
}

// noteCards learns an engine's max_model_len from its credential probe.
func (r *Router) noteCards(iid string, cards []vllm.ModelCard) {
	r.models.Note(iid, r.cfg.Model, cards)
}

func checkProfiles(cfg *fleet.Config, profiles *profile.Store) error {
	if profiles == nil {
		return errors.New("no profile store: run narwhal-profile, or point profiles.path at a narwhal.profiles file")
	}
	return profiles.Cover(cfg.IIDs())
}

func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock()
	}
	if o.IDs == nil {
		o.IDs = ports.RandomIDs()
	}
	if o.Rng == nil {
		o.Rng = ports.NewSeededRng(uint64(time.Now().UnixNano()))
	}
	if o.Lookup == nil {
		o.Lookup = os.LookupEnv
	}
	return o
}

// locked runs f holding r.mu: the one place the router takes it. f, and
// the …Locked methods it calls, touch core, stats, rng and freed.
func (r *Router) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// seatFreedLocked wakes the requests waiting for a phase seat; they place
// again and the ones that still find no seat wait on the next signal.
func (r *Router) seatFreedLocked() {
	close(r.freed)
	r.freed = make(chan struct{})
	r.serveQueueLocked()
}

// now is the router's monotonic time in seconds since it started: the
// scheduling core's time scale and the journal's arrived/at values.
func (r *Router) now() float64 { return r.clock.Now().Sub(r.epoch).Seconds() }

// background runs f until it returns or the router closes.
func (r *Router) background(f func(ctx context.Context)) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		f(r.bgCtx)
	}()
}

// lagMeasured mirrors a saturation probe tick into the gauges.
func (r *Router) lagMeasured(lag, sizing time.Duration) {
	r.metrics.LoopLag.Set(lag.Seconds())
	r.metrics.SizingDelay.Set(sizing.Seconds())
}

// ServeHTTP makes the router an http.Handler.
// A request addressed to a host the router does not answer is refused
// before any route sees it. A request that declares a body gets the body
// read timeout on its connection first: every route that reads a body
// sets its own deadline and lifts it (readBody, boundBodies), and one
// refused before reading it (a wrong Host, a non-JSON completion, a
// preflight, a missing key) leaves this one, so net/http's discard of
// the unread body after the answer ends within it instead of holding the
// connection for as long as the client keeps it open.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(r.httpOpts.BodyReadTimeout))
	}
	if e := r.hosts.Refusal(req); e != nil {
		e.Write(w)
		return
	}
	r.front.ServeHTTP(w, req)
}

// Metrics is the router's Prometheus collectors, for embedding callers.
func (r *Router) Metrics() *metrics.Metrics { return r.metrics }

// Start records every engine's process identity (bounded by
// engine.health_timeout_s), then runs the monitor loop until Close.
func (r *Router) Start() {
	if r.started.CompareAndSwap(false, true) {
		r.ha.Start()
		r.av.CaptureIdentities(r.bgCtx) // its credential probes also learn max_model_len
		if !r.av.LivenessSweeps() {
			src := enginelimits.Source{IIDs: r.order, Model: r.cfg.Model, Ask: r.probe.Credential, Log: r.log}
			r.background(func(ctx context.Context) { r.models.Watch(ctx, r.clock, src) }) // no sweeps to refresh it
		}
		r.identities.Store(true)
		if r.cache != nil {
			r.background(func(ctx context.Context) {
				r.cache.Follow(ctx, r.clock, units.Seconds(r.cfg.Controller.MonitorIntervalS), r.metrics.SetResidencyKnown)
			})
		}
		r.background(r.ui.Run) // the dashboard's history, sampled once a second
		r.background(func(ctx context.Context) { r.sat.Run(ctx, r.lagMeasured) })
		go r.monitor()
		r.background(r.evidence.Run) // returns at once when no store is configured
	}
}

// Shutdown stops admitting new requests and waits for in-flight ones to
// finish, or for ctx to end. Requests still running then are cut off by
// the caller closing the HTTP server.
func (r *Router) Shutdown(ctx context.Context) error {
	r.closing.Store(true)
	r.metrics.RouterReady.Set(0)
	r.ui.Close() // open dashboard feeds end now, not at the server's cut-off
	waited := make(chan struct{})
	go func() { r.inflight.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("graceful shutdown: %d requests still in flight: %w", r.retained.Load(), ctx.Err())
	}
	_ = r.ha.WriteHandoff() // the final state, while this router still holds the lease
	return err
}

// Close stops the monitor loop and releases engine connections. It does
// not close the journal, which belongs to the caller.
func (r *Router) Close() {
	r.closed.Do(func() {
		close(r.stop)
		if r.started.Load() {
			<-r.done
		}
		r.bgCancel()
		r.bg.Wait()
		r.ha.Close() // after the renewals stopped
		r.probe.Close()
		for _, e := range r.engines {
			e.client.Close()
		}
	})
}

// monitor runs a monitor pass every monitor interval until Close.
func (r *Router) monitor() {
	defer close(r.done)
	t := r.clock.NewTicker(units.Seconds(r.cfg.Controller.MonitorIntervalS))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C():
			if r.ha.Controls() {
				r.monitorPass()
			}
		}
	}
}
