// Package devfleet is `make run`: a local fleet of simulated vLLM engines,
// its fleet file and profile store under one directory, and the real
// router in front of them, all on loopback. It is what a new user runs
// first, so it prints how to talk to the router and stops cleanly.
package devfleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/sweep"
	"github.com/narwhal-go/narwhal/internal/router"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Options configure a dev fleet.
type Options struct {
	Dir     string // where fleet.json, profiles.json and journal.jsonl go
	Host    string // router bind address; loopback by default
	Port    int    // router port; 0 picks a free one
	Engines int    // simulated engines; half prefill, half decode
	Model   string
	Logger  *slog.Logger
	// AdminToken protects the lifecycle actions; empty draws a random one
	// that the banner prints. AdminTokenEnv names the variable it came
	// from, for the banner (which never prints an operator's token).
	AdminToken    string
	AdminTokenEnv string
	// Ready, when set, receives the router's base URL once it serves.
	Ready func(baseURL string)
	// Sweep is the profiling sweep run over the simulated engines before
	// the router starts; nil is QuickSweep.
	Sweep *sweep.Config
	// OnEngines, when set, receives the simulated engines once they run
	// (tests restart one to change its build).
	OnEngines func(*simengine.Fleet)
	// Tune, when set, changes the generated fleet before it is written
	// (tests compare settings on the same dev fleet).
	Tune func(*fleet.Config)
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = filepath.Join("runs", "dev")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Engines <= 0 {
		o.Engines = 4
	}
	if o.Model == "" {
		o.Model = "narwhal/sim-llama-3-8b"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run starts the fleet and the router, prints how to reach them to out,
// and serves until ctx ends; then it drains the router and stops the
// engines.
func Run(ctx context.Context, o Options, out io.Writer) error {
	o.defaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("dev fleet: %w", err)
	}
	engines, err := simengine.StartFleet(o.Engines, simengine.Config{Model: o.Model, Profile: simengine.WarmProfile("sim"),
		Prefix: simengine.DevPrefixCache()}, nil)
	if err != nil {
		return fmt.Errorf("dev fleet: start simulated engines: %w", err)
	}
	defer engines.Close()
	if o.OnEngines != nil {
		o.OnEngines(engines)
	}
	sidecars, err := startSidecars(ctx, engines, o.Logger)
	if err != nil {
		return err
	}
	defer closeAll(sidecars)
	cfg, _ := Fleet(o.Model, engines.URLs(), o.Dir) // the engines' own curves stay theirs: the router gets measured ones
	// The simulated engines' GPU (simengine.Config.GPU's default), which
	// their sidecars observe and preflight's hardware gate compares.
	cfg.Hardware = &fleet.Hardware{Accelerator: simengine.DefaultGPUName, AcceleratorsPerEngine: 1, TensorParallel: 1}
	if o.Tune != nil {
		o.Tune(cfg)
	}
	contract := simengine.Contract(simengine.DefaultCompat(o.Model))
	cfg.EngineContract = &contract
	for i, s := range sidecars {
		cfg.Engines[i].AttestationURL = s.AttestationURL()
	}
	fleetPath := filepath.Join(o.Dir, "fleet.json")
	store, err := profileFleet(ctx, o, cfg, out)
	if err != nil {
		return err
	}
	if err := cfg.Save(fleetPath); err != nil {
		return fmt.Errorf("dev fleet: %w", err)
	}
	// Serve from the files just written, as narwhal-serve would.
	loaded, err := fleet.Load(fleetPath)
	if err != nil {
		return fmt.Errorf("dev fleet: the generated fleet does not load: %w", err)
	}
	return serve(ctx, o, loaded, store, fleetPath, out)
}

func serve(ctx context.Context, o Options, cfg *fleet.Config, store *profile.Store, fleetPath string, out io.Writer) error {
	jw, err := journal.Open(cfg.JournalPath(), journal.Options{Version: version.Version})
	if err != nil {
		return fmt.Errorf("dev fleet: %w", err)
	}
	defer jw.Close()
	token, err := adminToken(o.AdminToken)
	if err != nil {
		return err
	}
	var src router.ProfileSource
	// Serve the profile store from its file, as narwhal-serve would, so
	// that a re-profiled engine (narwhal-profile --merge) is taken live.
	if fromFile, digest, err := profile.LoadDigest(cfg.Profiles.Path); err == nil {
		store, src = fromFile, router.ProfileSource{Path: cfg.Profiles.Path, Digest: digest}
	}
	// The token goes to the router and the banner only: never into the
	// fleet file, the journal or the handoff document.
	r, err := router.New(cfg, store, router.Options{Profiles: src, Logger: o.Logger, Journal: jw, AdminToken: token,
		HA: router.HA{StatePath: cfg.Recovery.StatePath}, Hosts: httpguard.HostGuard{Loopback: httpguard.IsLoopback(o.Host)}})
	if err != nil {
		return fmt.Errorf("dev fleet: %w", err)
	}
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dev fleet: listen on %s: %w (is another router running? pick a port with --port)", addr, err)
	}
	base := "http://" + ln.Addr().String()
	shown := "$" + o.AdminTokenEnv
	if o.AdminToken == "" {
		shown = token // generated here: the banner is the only place it exists
	}
	printBanner(out, base, cfg, fleetPath, shown)
	if o.Ready != nil {
		o.Ready(base)
	}
	return router.Serve(ctx, ln, r, time.Duration(cfg.Serving.GracefulTimeoutS*float64(time.Second)))
}

// Fleet is the dev fleet's configuration for engines at urls: the first
// half prefill, the rest decode, retries on with a handoff bound below the
// simulated engines' 30 s KV lease.
func Fleet(model string, urls []string, dir string) (*fleet.Config, *profile.Store) {
	cfg := fleet.Defaults()
	cfg.Model = model
	cfg.SLO = fleet.SLO{TTFT: 1.0, TPOT: 0.05}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	half := max(1, len(urls)/2)
	for i, u := range urls {
		role, iid := fleet.Prefill, fmt.Sprintf("p%d", i)
		if i >= half {
			role, iid = fleet.Decode, fmt.Sprintf("d%d", i-half)
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
		store.Profiles = append(store.Profiles, simengine.WarmProfile(iid))
	}
	if len(urls) == 1 {
		cfg.Engines[0].Role = fleet.Decode
	}
	cfg.Serving.MaxAttempts = 2
	cfg.Serving.HandoffTimeoutS = 20
	cfg.Serving.GracefulTimeoutS = 5
	cfg.Profiles.Path = filepath.Join(dir, "profiles.json")
	cfg.Recovery.StatePath = filepath.Join(dir, "state.json")
	cfg.Engine.ControlConnections = max(4, 2*len(urls))
	return &cfg, store
}

// startSidecars runs an attestation sidecar beside every engine, as an
// operator runs narwhal-attest beside every vLLM engine: the fleet is then
// contracted, so lifecycle drains and readmissions work and verify the
// attested build.
func startSidecars(ctx context.Context, engines *simengine.Fleet, log *slog.Logger) ([]*attest.Server, error) {
	var out []*attest.Server
	for _, e := range engines.Engines {
		doc, err := attest.Parse("simengine "+e.EngineID(), e.AttestationDocument())
		if err == nil {
			var s *attest.Server
			if s, err = attest.ServeEngine(ctx, doc, e.URL(), "127.0.0.1:0", log, e); err == nil {
				out = append(out, s)
				continue
			}
		}
		closeAll(out)
		return nil, fmt.Errorf("dev fleet: attestation sidecar for %s: %w", e.URL(), err)
	}
	return out, nil
}

func closeAll(servers []*attest.Server) {
	for _, s := range servers {
		s.Close()
	}
}

// adminToken is the operator's token, or a fresh random one: a router on
// the operator's machine must not take lifecycle actions from whoever
// reaches its port (a web page included).
func adminToken(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dev fleet: draw an admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// printBanner says how to reach the fleet; token is the generated admin
// token, or "$NAME" for one the operator supplied.
func printBanner(out io.Writer, base string, cfg *fleet.Config, fleetPath, token string) {
	tokenLine := token + "   (generated for this run; choose one with --admin-token-env NAME)"
	auth := "'Authorization: Bearer " + token + "'"
	if strings.HasPrefix(token, "$") {
		tokenLine = "from " + token
		auth = `"Authorization: Bearer ` + token + `"`
	}
	last := cfg.Engines[len(cfg.Engines)-1].IID
	fmt.Fprintf(out, `narwhal dev fleet: %d simulated engines with attestation sidecars, router on %s

  OpenAI base URL   %s/v1   (model %q, any API key)
  try               curl -sN %s/v1/chat/completions -H 'Content-Type: application/json' \
                      -d '{"model":"%s","stream":true,"max_tokens":32,"messages":[{"role":"user","content":"Hello"}]}'
  dashboard         %s/narwhal/ui   (Prometheus and alerts: make observe)
  state             %s/narwhal/state
  metrics           %s/metrics
  fleet file        %s
  journal           %s
  admin token       %s
  drain an engine   curl -X POST %s/narwhal/lifecycle/drain -H %s \
                      -H 'Content-Type: application/json' -d '{"iid":"%s"}'
                    (readmit: the same at /narwhal/lifecycle/readmit; see docs/reliability.md)

Ctrl-C stops everything.
`, len(cfg.Engines), base, base, cfg.Model, base, cfg.Model, base, base, base, fleetPath, cfg.JournalPath(), tokenLine, base, auth, last)
}

// QuickSweep is make run's profiling sweep: the real narwhal-profile
// measurement (sweep.Fleet), sized so the simulated engines are profiled in
// seconds inside their 4096-token context. It includes the warm sweep
// (--warm): without a cached fit the router prices every prefill cold, and
// its grid reaches down to chat-sized prefixes and suffixes, the domain a
// conversation's next turn is priced in.
func QuickSweep() sweep.Config {
	return sweep.Config{PrefillLengths: []int{256, 1024, 2048, 4095}, PrefillRepeats: 3, DecodeLengths: []int{256, 1024},
		Concurrency: []int{1, 4, 16}, DecodeTokens: 16, Timeout: 60 * time.Second,
		Warm: true, WarmPrefixes: []int{16, 512, 1536, 3072}, WarmSuffixes: []int{8, 64, 512}}
}

// profileFleet profiles the simulated engines the way an operator profiles
// real ones (narwhal-profile's sweep.Fleet), writes profiles.path and its
// samples file, and returns the store the router will load.
func profileFleet(ctx context.Context, o Options, cfg *fleet.Config, out io.Writer) (*profile.Store, error) {
	sc := QuickSweep()
	if o.Sweep != nil {
		sc = *o.Sweep
	}
	start := time.Now()
	run := sweep.Fleet{Config: cfg, Engines: cfg.Engines, Out: cfg.Profiles.Path}
	results := run.Sweep(ctx, sc)
	for attempt := 0; attempt < 2; attempt++ {
		if resweepFailed(ctx, run, sc, results) == nil {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fallBack(results, out)
	for _, r := range results {
		if r.Row == nil {
			return nil, fmt.Errorf("dev fleet: profiling the simulated engines: %w (samples in %s)", r.Err, sweep.SamplesPath(cfg.Profiles.Path))
		}
	}
	if _, err := run.Write(results); err != nil {
		return nil, fmt.Errorf("dev fleet: %w", err)
	}
	fmt.Fprintf(out, "profiled %d simulated engines in %.1fs (narwhal-profile's sweep) -> %s\n", len(results), time.Since(start).Seconds(), cfg.Profiles.Path)
	st, err := profile.Load(cfg.Profiles.Path)
	if err != nil {
		return nil, fmt.Errorf("dev fleet: the measured store does not load: %w", err)
	}
	return st, nil
}

// resweepFailed profiles once more the engines whose sweep failed, in
// place in results: on a busy laptop one disturbed cohort can push a fit
// over the limits, and make run should not fail for it. A failure of the
// new sweep is returned.
func resweepFailed(ctx context.Context, run sweep.Fleet, sc sweep.Config, results []sweep.Result) error {
	var idx []int
	run.Engines = nil
	for i, r := range results {
		if r.Err != nil {
			idx = append(idx, i)
			run.Engines = append(run.Engines, run.Config.Engines[i])
		}
	}
	if len(idx) == 0 {
		return nil
	}
	for k, r := range run.Sweep(ctx, sc) {
		results[idx[k]] = r
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// fallBack gives every engine whose fit was still refused the simulated
// engine's own curves, bound to the generation its sweep read, and says so:
// a host too busy to time 12 ms decode steps within 5% must not stop make
// run. The samples file keeps the refused measurements and their reason.
func fallBack(results []sweep.Result, out io.Writer) {
	for i, r := range results {
		if r.Err == nil || r.Samples == nil || r.Samples.Before.Digest == "" {
			continue
		}
		row := simengine.WarmProfile(r.Samples.IID) // the curves the dev fleet's engines run (Run)
		row.GenerationDigest = &r.Samples.Before.Digest
		fmt.Fprintf(out, "warning: %v; serving %s with the simulated engine's built-in curves (re-run narwhal-profile --merge --engines %s on a quieter machine)\n",
			r.Err, r.Samples.IID, r.Samples.IID)
		results[i] = sweep.Result{Row: &row, Samples: r.Samples}
	}
}
