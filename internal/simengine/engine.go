// Package simengine is a vLLM-compatible engine with synthetic timing and
// fault injection: the peer every router, controller and preflight test
// talks to when there is no GPU. It serves vLLM's HTTP surface, plays both
// sides of the NixlConnector kv_transfer_params handshake (a KV lease on
// the producer, a pull over a loopback side channel on the consumer),
// times every step with enginemodel and the engine's profile, and can be
// told to misbehave in the ways real engines do.
package simengine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/enginemodel"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Config describes one simulated engine. Zero values take the defaults
// documented on each field.
type Config struct {
	Host             string        // bind address; default 127.0.0.1
	Port             int           // 0 picks a free port
	Model            string        // served model name and launch string; required
	MaxModelLen      int           // default 4096
	Profile          profile.Row   // timing curves; required (see DefaultProfile)
	KVCapacityTokens int           // default: the profile's kv_capacity_tokens, else 65536
	BlockSize        int           // default 16
	MaxNumSeqs       int           // default 256
	EngineID         string        // NIXL engine id; default a fresh random id
	Compat           CompatFactors // compatibility factors; default DefaultCompat(Model)
	APIKey           string        // like vllm serve --api-key: checked on /v1 paths
	SideChannelHost  string        // advertised remote_host; default Host
	SideChannelPort  int           // 0 picks a free port
	AdminPort        int           // loopback fault admin port; 0 picks a free port
	LeaseDuration    time.Duration
	WeightsGiB       float64     // for the startup log; default 14.99
	Faults           Faults      // faults active from the start
	FailStartup      string      // "", "kv-cache-too-small" or "cuda-oom"
	Boot             Boot        // a computed start-up on simulated hardware (boot.go); zero: the fixed log
	Seed             uint64      // seeds the 500-rate fault and request id suffixes
	Prefix           PrefixCache // automatic prefix caching and KV cache events (prefixcache.go); off by default
	GPU              GPU         // the simulated device /v1/server/devices reports (gpu.go); default an H100, or Boot's device

	Clock      ports.Clock
	IDs        ports.IDGenerator
	Logger     *slog.Logger
	StartupLog io.Writer // vLLM-format startup lines; default discarded
}

// DefaultProfile is a Llama-3-8B-on-one-H100-like profile for callers that
// have no store at hand.
func DefaultProfile(iid string) profile.Row {
	one, maxReq, minKV, maxKV := 1, 256, 256, 131072
	rs, fit, cv := 5e-5, 0.02, 0.04
	return profile.Row{IID: iid, TTFTA: 2e-8, TTFTB: 6e-5, TTFTC: 0.015, TPOTSlope: 1.5e-7, TPOTIntercept: 0.012,
		TPOTRequestSlope: &rs, DecodeMinRequests: &one, DecodeMaxRequests: &maxReq, DecodeMinKVTokens: &minKV, DecodeMaxKVTokens: &maxKV,
		DecodeFitMAPE: &fit, DecodeCVMAPE: &cv}
}

func (c *Config) defaults() error {
	if err := c.conflicts(); err != nil {
		return err
	}
	c.fillDefaults()
	if c.Boot.Enabled() {
		if err := c.Boot.defaults(c); err != nil {
			return err
		}
		dt, _ := torchDType(c.Boot.DType)
		c.Compat.DType = "torch." + dt // the dtype is a NIXL compatibility factor
	}
	c.gpuDefaults()
	if err := c.GPU.validate(); err != nil {
		return err
	}
	if c.Profile.IID == "" {
		return errors.New("simengine: Profile is required (load a narwhal.profiles store or use DefaultProfile)")
	}
	return c.Profile.Validate()
}

// conflicts refuses the settings a simulated boot would contradict.
func (c *Config) conflicts() error {
	if c.Model == "" {
		return errors.New("simengine: Model is required (pass --model)")
	}
	if c.Boot.Enabled() && c.KVCapacityTokens > 0 {
		return errors.New("simengine: KVCapacityTokens and Boot both set: the simulated boot computes the KV cache size (drop --kv-capacity-tokens)")
	}
	if c.Boot.Enabled() && c.FailStartup != "" {
		return errors.New("simengine: FailStartup and Boot both set: the simulated boot decides whether it fails (drop --fail-startup)")
	}
	return nil
}

// fillDefaults gives every unset field its documented default.
func (c *Config) fillDefaults() {
	kv := 65536
	if c.Profile.KVCapacityTokens != nil {
		kv = *c.Profile.KVCapacityTokens
	}
	setDefault(&c.Host, "127.0.0.1")
	setDefault(&c.MaxModelLen, 4096)
	setDefault(&c.KVCapacityTokens, kv)
	setDefault(&c.BlockSize, 16)
	setDefault(&c.MaxNumSeqs, 256)
	if c.Compat == (CompatFactors{}) {
		c.Compat = DefaultCompat(c.Model)
	}
	setDefault(&c.SideChannelHost, c.Host)
	setDefault(&c.LeaseDuration, 30*time.Second)
	setDefault(&c.WeightsGiB, 14.99)
	if c.Clock == nil {
		c.Clock = ports.SystemClock()
	}
	if c.IDs == nil {
		c.IDs = ports.RandomIDs()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.StartupLog == nil {
		c.StartupLog = io.Discard
	}
}

// setDefault gives *p the value d when it is unset: the empty string, or a
// number that is zero or negative (which the config treats as unset).
func setDefault[T cmp.Ordered](p *T, d T) {
	var zero T
	if *p <= zero {
		*p = d
	}
}

// Engine is one running simulated engine.
type Engine struct {
	cfg   Config
	clock ports.Clock
	log   *slog.Logger

	mu         sync.Mutex
	model      *enginemodel.Model
	sinks      map[string]*sink
	leases     map[string]*lease
	met        *metrics
	engineID   string
	startTime  time.Time
	generation int
	faults     Faults
	stallOnce  time.Duration
	rng        ports.Rng
	deferred   int
	nextBlock  int
	srv        *http.Server  // nil while refusing connections
	ident      CompatFactors // compatibility factors of the running process (RestartAs changes them)
	pc         *prefixCache  // nil without prefix caching
	pcReqs     map[string]pcReq

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	apiKey    atomic.Pointer[string] // the --api-key in force, read on every request (SetAPIKey changes it)
	accepted  atomic.Int64           // TCP connections the serving port accepted (Connections)
	httpAddr  string
	scLn      net.Listener
	adminLn   net.Listener
	adminSrv  *http.Server
	closeOnce sync.Once
}

// Start brings an engine up: startup log, model, HTTP server, side channel,
// admin endpoint and step loop. A StartupError means the engine refused to
// start the way vLLM would (the log already says why).
func Start(cfg Config) (*Engine, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.EngineID == "" {
		cfg.EngineID = cfg.IDs.NewID()
	}
	var hl net.Listener
	if cfg.Boot.Enabled() {
		var err error
		if hl, err = bootStart(&cfg); err != nil {
			return nil, err
		}
	} else if err := startupLog(cfg); err != nil {
		return nil, err
	}
	model, err := enginemodel.New(enginemodel.Config{Timing: cfg.Profile, KVCapacityTokens: cfg.KVCapacityTokens,
		BlockSize: cfg.BlockSize, MaxNumSeqs: cfg.MaxNumSeqs, MaxBatchedTokens: max(8192, cfg.MaxModelLen),
		StepOverheadS: max(0, cfg.Profile.TTFTC)}) // a batched prefill step pays the intercept once, as vLLM's does
	if err != nil {
		return nil, err
	}
	pc, err := newPrefixCache(cfg.Prefix, cfg.BlockSize, cfg.KVCapacityTokens/cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, model: model, sinks: map[string]*sink{},
		leases: map[string]*lease{}, met: newMetrics(cfg.Model), engineID: cfg.EngineID,
		startTime: cfg.Clock.Now(), faults: cfg.Faults, rng: ports.NewSeededRng(cfg.Seed), wake: make(chan struct{}, 1),
		ident: cfg.Compat, pc: pc, pcReqs: map[string]pcReq{}}
	e.apiKey.Store(&cfg.APIKey)
	if e.engineID == "" {
		e.engineID = cfg.IDs.NewID()
	}
	e.stallOnce = units.Seconds(cfg.Faults.StallSeconds)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if err := e.listen(hl); err != nil {
		e.Close()
		return nil, err
	}
	e.wg.Add(1)
	go e.run()
	e.log.Info("simengine started", "url", e.URL(), "engine_id", e.engineID, "side_channel", e.scLn.Addr().String())
	return e, nil
}

// listen serves on hl (already bound by a simulated boot) or binds the
// HTTP port, then the side channel and the admin endpoint.
func (e *Engine) listen(hl net.Listener) error {
	if hl == nil {
		var err error
		if hl, err = net.Listen("tcp", net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.cfg.Port))); err != nil {
			return fmt.Errorf("simengine: listen on %s:%d: %w (pick another --port)", e.cfg.Host, e.cfg.Port, err)
		}
	}
	var err error
	e.httpAddr = hl.Addr().String()
	e.scLn, err = net.Listen("tcp", net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.cfg.SideChannelPort)))
	if err != nil {
		hl.Close()
		return fmt.Errorf("simengine: side channel listen on port %d: %w (pick another --side-channel-port)", e.cfg.SideChannelPort, err)
	}
	e.adminLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(e.cfg.AdminPort)))
	if err != nil {
		hl.Close()
		return fmt.Errorf("simengine: admin listen on port %d: %w (pick another --admin-port)", e.cfg.AdminPort, err)
	}
	e.adminSrv = &http.Server{Handler: e.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	e.serveOn(e.adminSrv, e.adminLn)
	e.wg.Add(1)
	go e.acceptSideChannel()
	if e.faults.RefuseConnections {
		hl.Close()
		return nil
	}
	e.mu.Lock()
	e.srv = e.newServer()
	e.serveOn(e.srv, hl)
	e.mu.Unlock()
	return nil
}

func (e *Engine) newServer() *http.Server {
	return &http.Server{Handler: e.handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelDebug),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				e.accepted.Add(1)
			}
		}}
}

// Connections is how many TCP connections the serving port has accepted:
// a client that keeps its connections alive opens few.
func (e *Engine) Connections() int64 { return e.accepted.Load() }

func (e *Engine) serveOn(s *http.Server, l net.Listener) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = s.Serve(l)
	}()
}

// URL is the engine's base URL, e.g. http://127.0.0.1:41234.
func (e *Engine) URL() string { return "http://" + e.httpAddr }

// AdminURL is the loopback fault admin endpoint's base URL.
func (e *Engine) AdminURL() string { return "http://" + e.adminLn.Addr().String() }

// SideChannelAddr is where consumers pull this engine's KV.
func (e *Engine) SideChannelAddr() string { return e.scLn.Addr().String() }

// EngineID is the current NIXL engine id (it changes on Restart).
func (e *Engine) EngineID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.engineID
}

// Model is the served model name.
func (e *Engine) Model() string { return e.cfg.Model }

// Close stops everything the engine started and waits for it.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		e.mu.Lock()
		srv := e.srv
		e.srv = nil
		e.abortAll()
		e.mu.Unlock()
		if srv != nil {
			_ = srv.Close()
		}
		if e.adminSrv != nil {
			_ = e.adminSrv.Close()
		}
		if e.scLn != nil {
			_ = e.scLn.Close()
		}
		e.wg.Wait()
		e.pc.close()
	})
	return nil
}

// Restart simulates a process restart: a new engine id and process start
// time, every resident KV block and lease lost, in-flight requests cut off
// and counters back to zero.
func (e *Engine) Restart() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.restartLocked()
}

// RestartAs restarts the engine as another build or launch: id replaces
// the compatibility factors /version and the NIXL handshake report, as
// restarting vllm serve with another --vllm-version, dtype or attention
// backend would. An empty id.Model keeps the served model.
func (e *Engine) RestartAs(id CompatFactors) {
	if id.Model == "" {
		id.Model = e.cfg.Model
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ident = id
	e.restartLocked()
}

// Compat is the running process's compatibility factors.
func (e *Engine) Compat() CompatFactors {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ident
}

// SetAPIKey replaces the key the engine requires on /v1 paths ("" none),
// as relaunching vllm serve with another --api-key would.
func (e *Engine) SetAPIKey(key string) { e.apiKey.Store(&key) }

func (e *Engine) restartLocked() {
	e.abortAll()
	e.model.Reset()
	e.leases = map[string]*lease{}
	e.met = newMetrics(e.cfg.Model)
	e.engineID = e.cfg.IDs.NewID()
	e.startTime = laterStart(e.clock.Now(), e.startTime)
	e.generation++
	e.resetPrefixLocked()
	e.signal()
	e.log.Info("simengine restarted", "engine_id", e.engineID)
}

// minStartGap is how much later than its predecessor a restarted
// process starts at the least. Readers treat starts within
// vllm.StartTolerance (1 µs) as one process, and the gauge is a float of
// seconds, so a restart 1 ns later would read as the same process; 1 ms
// is far past both.
const minStartGap = time.Millisecond

// laterStart is a restarted process's start: now, but never sooner than
// minStartGap after prev, so callers may restart right away and still see
// a new process start — the clock's resolution is not the caller's worry.
func laterStart(now, prev time.Time) time.Time {
	if floor := prev.Add(minStartGap); now.Before(floor) {
		return floor
	}
	return now
}

func (e *Engine) abortAll() {
	for id, s := range e.sinks {
		s.push(evt{kind: evAbort})
		delete(e.sinks, id)
	}
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}
