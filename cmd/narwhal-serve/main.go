// Command narwhal-serve is the router: one OpenAI-compatible endpoint in
// front of a vLLM fleet, serving every request as a prefill leg and a
// decode leg on different engines.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/router"
	"github.com/narwhal-go/narwhal/internal/tracing"
	"github.com/narwhal-go/narwhal/internal/version"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func main() { cli.Main(newRoot()) }

type flags struct {
	fleet, host, journal, logFormat, adminTokenEnv string
	engineTransport                                string
	port, maxConcurrent                            int
	graceful                                       float64
	journalMaxBytes                                int64
	allowedHosts                                   []string
	resume                                         bool
	standbyOf, leasePath, routerID                 string
	leaseTTL, leaseRenew, leaseMargin              time.Duration
	http                                           httpguard.Options
	evidence                                       router.EvidenceOptions
	otlpTraces                                     string
	apiKeyEnv                                      []string
}

// serveLong is narwhal-serve --help's description.
const serveLong = `narwhal-serve loads the fleet file and the profile store at profiles.path,
then serves POST /v1/completions and /v1/chat/completions (streaming or
not), GET /v1/models, /health, /ready, /metrics, /narwhal/state,
/narwhal/lifecycle, /narwhal/handoff and the live dashboard /narwhal/ui
(GET / redirects there), and POST /narwhal/lifecycle/drain,
/narwhal/lifecycle/readmit and /narwhal/profiles/reload (admin: a JSON body, the bearer token of
--admin-token-env, and no cross-site browser Origin). With --api-key-env
every /v1/* route needs one of the client keys (Authorization: Bearer);
/v1/* POSTs need Content-Type: application/json; serving.cors_origins
lists the browser origins that may call /v1/*.

Every request is sized, admitted only when the TTFT target can be met,
prefilled on one engine and decoded on another with the KV handed over
through vLLM's kv_transfer_params, and recorded as one row of the journal.

It binds 127.0.0.1 by default: put authenticating ingress in front of it
and keep /narwhal/* and /metrics on the control network. Slow clients are
bounded: a completion body must arrive within --body-read-timeout (408),
one client IP may send --body-reads-per-client slow bodies (still arriving
after --body-grace) at once (429), and
idle keep-alive connections close after --idle-timeout. On SIGTERM or
SIGINT it stops admitting, lets in-flight streams finish for the graceful
timeout, writes the final handoff document, and exits.

Engines are watched continuously: failed legs feed a per-class breaker,
ejected engines are probed for readmission, and a restarted engine process
is excluded until it is validated again; profiles.path is re-read when it
changes, so an engine re-profiled with narwhal-profile --merge returns
without a restart. With --resume the router carries
on from the handoff document at recovery.state_path; with a lease (the
file at --lease-path, or the etcd or Kubernetes Lease that the fleet's
recovery.lease selects) and --standby-of on the standby, two routers share
one fleet safely: only the lease holder places work.`

func newRoot() *cobra.Command {
	var f flags
	root := cli.NewRoot("narwhal-serve --fleet PATH", "Serve an OpenAI-compatible endpoint over a disaggregated vLLM fleet")
	root.Long = serveLong
	root.Args = cobra.NoArgs
	fl := root.Flags()
	fl.StringVar(&f.fleet, "fleet", "", "fleet file (narwhal.fleet v1); required")
	fl.StringVar(&f.host, "host", "127.0.0.1", "address to bind")
	fl.IntVar(&f.port, "port", 8000, "port to bind (0 picks a free one)")
	fl.StringVar(&f.journal, "journal", "", "request journal (default: journal.jsonl beside profiles.path)")
	fl.Int64Var(&f.journalMaxBytes, "journal-max-bytes", 0, "rotate the journal before it passes this size: the full file becomes <journal>.N and a new one starts with its own meta row (0: never; narwhal report reads the set as one)")
	fl.IntVar(&f.maxConcurrent, "max-concurrent", 0, "admission limit, 1..serving.max_connections (default serving.max_connections)")
	fl.Float64Var(&f.graceful, "graceful-timeout", -1, "whole seconds in-flight requests get after SIGTERM; -1 uses serving.graceful_timeout_s")
	fl.StringVar(&f.evidence.Store, "evidence-store", "", "evidence store: on every --evidence-interval write serving records from the journal and publish each endpoint's tier (empty: off)")
	fl.DurationVar(&f.evidence.Interval, "evidence-interval", time.Minute, "how often the evidence pass runs")
	fl.DurationVar(&f.evidence.Window, "evidence-window", 10*time.Minute, "journal window each serving record covers")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "extra Host names the router answers (comma-separated; \"*.example.com\" for a domain). Bound to loopback it answers only localhost and IP addresses besides these (a DNS-rebinding guard); bound elsewhere, set these to answer only them")
	fl.StringVar(&f.adminTokenEnv, "admin-token-env", "", "name of the environment variable holding the bearer token for POST /narwhal/lifecycle/* (without one, lifecycle actions are accepted only when bound to loopback)")
	fl.BoolVar(&f.resume, "resume", false, "resume roles, ejections, lifecycle and counters from recovery.state_path (also recovery.resume)")
	fl.StringVar(&f.standbyOf, "standby-of", "", "run as a warm standby of the primary router at this base URL (needs a lease: --lease-path or recovery.lease)")
	fl.StringVar(&f.leasePath, "lease-path", "", "router lease file on storage shared by primary and standby (recovery.lease.backend file); fences the router that does not hold it")
	fl.StringVar(&f.routerID, "router-id", "", "this router's name in the lease holder token (default: the host name)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 5*time.Second, "lease lifetime")
	fl.DurationVar(&f.leaseRenew, "lease-renew-interval", time.Second, "how often the holder renews the lease")
	fl.DurationVar(&f.leaseMargin, "lease-safety-margin", time.Second, "the holder fences itself this long before the shared expiry")
	fl.DurationVar(&f.http.BodyReadTimeout, "body-read-timeout", httpguard.DefaultBodyReadTimeout, "a completion body must arrive within this (never past serving.request_timeout_s), else 408")
	fl.IntVar(&f.http.BodyReadsPerClient, "body-reads-per-client", httpguard.DefaultBodyReadsPerClient, "slow completion bodies (still arriving after --body-grace) one client IP may be sending at once, else 429; bodies sent in one go never count")
	fl.DurationVar(&f.http.BodyGrace, "body-grace", httpguard.DefaultBodyGrace, "a completion body still arriving after this is slow and needs a --body-reads-per-client / --slow-bodies slot")
	fl.IntVar(&f.http.SlowBodies, "slow-bodies", httpguard.DefaultSlowBodies, "slow completion bodies all clients together may be sending at once, else 429")
	fl.DurationVar(&f.http.FeedWriteTimeout, "feed-write-timeout", httpguard.DefaultFeedWriteTimeout, "a dashboard feed event must be written within this; a viewer that stops reading is dropped")
	fl.IntVar(&f.http.FeedsPerClient, "feeds-per-client", httpguard.DefaultFeedsPerClient, "dashboard feeds one client IP may hold open, else 429")
	fl.IntVar(&f.http.Feeds, "feeds", httpguard.DefaultFeeds, "dashboard feeds all clients together may hold open, else 503")
	fl.DurationVar(&f.http.ReadHeaderTimeout, "read-header-timeout", httpguard.DefaultReadHeaderTimeout, "request headers must arrive within this")
	fl.DurationVar(&f.http.IdleTimeout, "idle-timeout", httpguard.DefaultIdleTimeout, "close keep-alive connections idle this long")
	fl.StringVar(&f.engineTransport, "engine-transport", vllm.TransportH1, "HTTP/1.1 client of the engine legs: h1 (narwhal's own) or net/http (Go's, tuned); docs/performance.md compares them")
	fl.StringSliceVar(&f.apiKeyEnv, "api-key-env", nil, "name of an environment variable holding a client API key that /v1/* requires as Authorization: Bearer KEY (repeat, or comma-separate, for key rotation; default: none, authenticate at the ingress in front)")
	fl.StringVar(&f.otlpTraces, "otlp-traces-endpoint", "", "export router spans (request, admission, prefill, kv_handoff, decode) over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318/v1/traces (default: none; traceparent is passed to the engines either way)")
	root.RunE = func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), f) }
	return root
}

func run(ctx context.Context, f flags) error {
	if err := checkFlags(f); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat)
	if err != nil {
		return err
	}
	keys, err := clientKeys(f.apiKeyEnv)
	if err != nil {
		return err
	}
	cfg, profiles, digest, err := loadFleet(f.fleet)
	if err != nil {
		return err
	}
	graceful, err := gracefulTimeout(f.graceful, cfg)
	if err != nil {
		return err
	}
	jw, err := openJournal(f, cfg)
	if err != nil {
		return err
	}
	defer jw.Close()
	adminToken, err := cli.AdminToken(f.adminTokenEnv)
	if err != nil {
		return err
	}
	ha, err := haOptions(f, cfg)
	if err != nil {
		return err
	}
	defer closeLease(ha)
	tracer, err := tracing.New(tracing.Options{Endpoint: f.otlpTraces})
	if err != nil {
		return cli.Usage("--otlp-traces-endpoint: %v", err)
	}
	if err := httpguard.CheckAllowed(f.allowedHosts); err != nil {
		return cli.Usage("%v", err)
	}
	defer tracer.Shutdown(context.Background()) // flushes the last spans
	r, err := router.New(cfg, profiles, router.Options{Profiles: router.ProfileSource{Path: cfg.Profiles.Path, Digest: digest}, EngineTransport: f.engineTransport, Logger: log, Journal: jw, MaxConcurrent: f.maxConcurrent,
		AdminToken: adminToken, AdminOpen: httpguard.IsLoopback(f.host), Hosts: httpguard.HostGuard{Loopback: httpguard.IsLoopback(f.host), Allowed: f.allowedHosts}, HA: ha, HTTP: f.http, Evidence: f.evidence, Tracer: tracer,
		APIKeys: keys})
	if err != nil {
		return cli.Invalid(err)
	}
	ln, err := listen(f)
	if err != nil {
		return err
	}
	warnUnauthenticated(log, f.host, keys)
	log.Info("narwhal-serve listening", "addr", ln.Addr().String(), "model", cfg.Model,
		"engines", len(cfg.Engines), "journal", jw.Path(), "journal_run", jw.Run(), "version", version.String())
	return serveUntilSignal(ctx, ln, r, graceful, log)
}

// loadFleet reads the fleet file and the profile store it names, with
// the store's digest (what a reload compares against).
func loadFleet(path string) (*fleet.Config, *profile.Store, string, error) {
	cfg, err := fleet.Load(path)
	if err != nil {
		return nil, nil, "", cli.Invalid(err)
	}
	profiles, digest, err := profile.LoadDigest(cfg.Profiles.Path)
	if err != nil {
		return nil, nil, "", cli.Invalid(fmt.Errorf("%w (profiles.path in %s)", err, path))
	}
	return cfg, profiles, digest, nil
}

// listen binds --host:--port, saying what to do when the port is taken.
func listen(f flags) (net.Listener, error) {
	addr := cli.Addr(f.host, f.port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cli.Failed(fmt.Errorf("listen on %s: %w (is another process using the port? choose one with --port)", addr, err))
	}
	return ln, nil
}

// serveUntilSignal serves until SIGTERM or SIGINT, then drains for
// graceful seconds.
func serveUntilSignal(ctx context.Context, ln net.Listener, r *router.Router, graceful float64, log *slog.Logger) error {
	sctx, stop := cli.UntilSignal(ctx)
	defer stop()
	if err := router.Serve(sctx, ln, r, time.Duration(graceful*float64(time.Second))); err != nil {
		return cli.Failed(err)
	}
	log.Info("narwhal-serve stopped cleanly")
	return nil
}

// gracefulTimeout is --graceful-timeout when given (whole seconds), else
// serving.graceful_timeout_s.
func gracefulTimeout(flag float64, cfg *fleet.Config) (float64, error) {
	if flag < 0 {
		return cfg.Serving.GracefulTimeoutS, nil
	}
	if flag != float64(int(flag)) {
		return 0, cli.Usage("--graceful-timeout must be whole seconds, got %v", flag)
	}
	return flag, nil
}

// openJournal opens --journal (default beside the profiles), rotating at
// --journal-max-bytes.
func openJournal(f flags, cfg *fleet.Config) (*journal.Writer, error) {
	jpath := f.journal
	if jpath == "" {
		jpath = cfg.JournalPath()
	}
	if f.journalMaxBytes < 0 || (f.journalMaxBytes > 0 && f.journalMaxBytes < 4096) {
		return nil, cli.Usage("--journal-max-bytes %d: use 0 (no rotation) or at least 4096 bytes", f.journalMaxBytes)
	}
	jw, err := journal.Open(jpath, journal.Options{Version: version.Version, MaxBytes: f.journalMaxBytes})
	if err != nil {
		return nil, cli.Failed(err)
	}
	return jw, nil
}

// checkFlags refuses a missing --fleet and connection bounds that would
// switch a bound off.
func checkFlags(f flags) error {
	if f.fleet == "" {
		return cli.Usage("--fleet is required: name the fleet file to serve")
	}
	return checkHTTP(f.http)
}

// checkHTTP refuses connection bounds that would switch a bound off.
func checkHTTP(o httpguard.Options) error {
	for name, d := range map[string]time.Duration{"--body-read-timeout": o.BodyReadTimeout,
		"--read-header-timeout": o.ReadHeaderTimeout, "--idle-timeout": o.IdleTimeout,
		"--body-grace": o.BodyGrace, "--feed-write-timeout": o.FeedWriteTimeout} {
		if d <= 0 {
			return cli.Usage("%s must be positive, got %v", name, d)
		}
	}
	for name, n := range map[string]int{"--body-reads-per-client": o.BodyReadsPerClient, "--slow-bodies": o.SlowBodies,
		"--feeds-per-client": o.FeedsPerClient, "--feeds": o.Feeds} {
		if n < 1 {
			return cli.Usage("%s must be at least 1, got %d", name, n)
		}
	}
	return nil
}

// haOptions builds the handoff, resume and lease settings.
func haOptions(f flags, cfg *fleet.Config) (router.HA, error) {
	ha := router.HA{StatePath: cfg.Recovery.StatePath, Resume: f.resume || cfg.Recovery.Resume, StandbyOf: strings.TrimRight(f.standbyOf, "/")}
	lease, err := openLease(f, cfg.Recovery.Lease)
	if err != nil {
		return ha, err
	}
	if f.standbyOf != "" && lease == nil {
		return ha, cli.Usage("--standby-of needs a lease: --lease-path, or recovery.lease.backend etcd or kubernetes; the lease decides which router places work")
	}
	ha.Lease = lease
	return ha, nil
}

// closeLease closes the lease store's connections after Serve released
// the lease.
func closeLease(ha router.HA) {
	if ha.Lease != nil {
		_ = ha.Lease.Close()
	}
}

func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, cli.Usage("--log-format must be text or json, got %q", format)
}
