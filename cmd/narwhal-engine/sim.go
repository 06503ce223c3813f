package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

type simFlags struct {
	host, model, profilePath, profileIID, engineID, vllmVersion, apiKey, failStartup string
	port, maxModelLen, kvCap, maxNumSeqs, scPort, adminPort, attestPort              int
	attest                                                                           bool
	lease                                                                            time.Duration
	faults                                                                           simengine.Faults
	boot                                                                             bootFlags
	prefix                                                                           prefixFlags
	bootSpec                                                                         simengine.Boot // from boot, once the flags are parsed
	startupW                                                                         io.Writer      // the vLLM startup log
}

func (f *simFlags) register(c *cobra.Command, single bool) {
	fs := c.Flags()
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to bind")
	fs.StringVar(&f.model, "model", "sim-model", "served model name (also the NIXL hash's model factor)")
	fs.StringVar(&f.profilePath, "profile", "", "narwhal.profiles store; empty uses the built-in 8B-like profile")
	fs.StringVar(&f.vllmVersion, "vllm-version", "0.21.0", "version reported by /version and hashed for NIXL compatibility")
	fs.IntVar(&f.maxModelLen, "max-model-len", 4096, "context length")
	fs.IntVar(&f.kvCap, "kv-capacity-tokens", 0, "GPU KV cache size in tokens (default: the profile's, else 65536)")
	fs.IntVar(&f.maxNumSeqs, "max-num-seqs", 0, "sequences the simulated scheduler runs at once, as vLLM's --max-num-seqs (0: 256)")
	fs.StringVar(&f.apiKey, "api-key", "", "require Authorization: Bearer <key> on /v1 paths")
	fs.DurationVar(&f.lease, "kv-lease-duration", 30*time.Second, "how long a prefill's KV waits for its consumer")
	fs.Float64Var(&f.faults.LatencyMultiplier, "fault-latency-multiplier", 0, "scale every step's duration")
	fs.Float64Var(&f.faults.HTTP500Rate, "fault-http-500-rate", 0, "probability of an HTTP 500 per completion request")
	fs.IntVar(&f.faults.DropAfterTokens, "fault-drop-after-tokens", 0, "cut every stream after N tokens")
	fs.BoolVar(&f.faults.Unhealthy, "fault-unhealthy", false, "/health answers 503")
	fs.BoolVar(&f.faults.CorruptKV, "fault-corrupt-kv", false, "corrupt KV served to consumers")
	fs.Float64Var(&f.faults.JitterFraction, "fault-jitter-fraction", 0, "spread every step's duration uniformly over ± this fraction (0 ≤ f < 1)")
	fs.StringVar(&f.failStartup, "fail-startup", "", "fail like vLLM: kv-cache-too-small or cuda-oom (a fixed log; --gpu computes the start-up instead)")
	f.boot.register(fs)
	f.prefix.register(fs)
	if single {
		fs.IntVar(&f.port, "port", 8000, "HTTP port (0 picks a free one)")
		fs.StringVar(&f.profileIID, "profile-iid", "", "row of --profile to use (default: the first)")
		fs.StringVar(&f.engineID, "engine-id", "", "NIXL engine id (default: random)")
		fs.IntVar(&f.scPort, "side-channel-port", 0, "KV side-channel port (0 picks a free one)")
		fs.IntVar(&f.adminPort, "admin-port", 0, "loopback fault admin port (0 picks a free one)")
		fs.IntVar(&f.attestPort, "attest-port", -1, "also serve an attestation sidecar (narwhal-attest) on this port; 0 picks a free one, -1 none")
	} else {
		fs.BoolVar(&f.attest, "attest", false, "also serve an attestation sidecar per engine on a free port")
	}
}

// config builds engine i's configuration.
func (f *simFlags) config(store *profile.Store, i int) (simengine.Config, error) {
	row := simengine.DefaultProfile(fmt.Sprintf("engine-%d", i))
	if store != nil {
		switch {
		case f.profileIID != "":
			r, ok := store.Get(f.profileIID)
			if !ok {
				return simengine.Config{}, fmt.Errorf("--profile-iid %s: no such row in %s", f.profileIID, f.profilePath)
			}
			row = r
		case len(store.Profiles) > 0:
			row = store.Profiles[i%len(store.Profiles)]
		}
	}
	switch f.failStartup {
	case "", "kv-cache-too-small", "cuda-oom":
	default:
		return simengine.Config{}, fmt.Errorf("--fail-startup %q: use kv-cache-too-small or cuda-oom", f.failStartup)
	}
	id := simengine.DefaultCompat(f.model)
	id.VLLMVersion = f.vllmVersion
	c := simengine.Config{Host: f.host, Port: f.port, Model: f.model, MaxModelLen: f.maxModelLen, Profile: row,
		KVCapacityTokens: f.kvCap, MaxNumSeqs: f.maxNumSeqs, EngineID: f.engineID, Compat: id, APIKey: f.apiKey, SideChannelPort: f.scPort,
		AdminPort: f.adminPort, LeaseDuration: f.lease, Faults: f.faults, FailStartup: f.failStartup,
		Seed: uint64(i), StartupLog: f.startupW, Boot: f.bootSpec,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	return c, f.prefix.apply(&c, i)
}

// prepare reads the flags that need the parsed flag set: the simulated
// boot and the startup-log file (closed by the returned func).
func (f *simFlags) prepare(c *cobra.Command) (func(), error) {
	b, err := f.boot.boot(c.Flags())
	if err != nil {
		return nil, err
	}
	if b.Enabled() && c.Flags().Changed("kv-capacity-tokens") {
		return nil, errors.New("--kv-capacity-tokens and --gpu both set: the simulated start-up computes the KV cache size (drop --kv-capacity-tokens)")
	}
	if b.Enabled() && f.failStartup != "" {
		return nil, errors.New("--fail-startup and --gpu both set: the simulated start-up decides whether it fails (drop --fail-startup)")
	}
	w, closeLog, err := f.boot.logWriter()
	if err != nil {
		return nil, err
	}
	f.bootSpec, f.startupW = b, w
	return closeLog, nil
}

// withSetup runs body once the flags are checked, the start-up log is
// open and the profile store is loaded (every failure there is bad input),
// and closes the start-up log after it.
func (f *simFlags) withSetup(body func(c *cobra.Command, st *profile.Store) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, _ []string) error {
		closeLog, err := f.prepare(c)
		if err != nil {
			return cli.Invalid(err)
		}
		defer closeLog()
		st, err := f.store()
		if err != nil {
			return cli.Invalid(err)
		}
		return body(c, st)
	}
}

func (f *simFlags) store() (*profile.Store, error) {
	if f.profilePath == "" {
		return nil, nil
	}
	return profile.Load(f.profilePath)
}

func newSimCmd() *cobra.Command {
	f := &simFlags{}
	c := &cobra.Command{
		Use:   "sim",
		Short: "Serve one simulated vLLM engine (NixlConnector, kv_both) until SIGINT/SIGTERM",
		Args:  cobra.NoArgs,
		RunE: f.withSetup(func(c *cobra.Command, st *profile.Store) error {
			cfg, err := f.config(st, 0)
			if err != nil {
				return cli.Invalid(err)
			}
			e, err := simengine.Start(cfg)
			if err != nil {
				return startErr(err)
			}
			attURL := ""
			if f.attestPort >= 0 {
				s, suffix, err := sidecarBanner(e, f.host, f.attestPort, cfg.Logger)
				if err != nil {
					e.Close()
					return err
				}
				defer s.Close()
				attURL = suffix
			}
			fmt.Fprintf(c.OutOrStdout(), "%s admin=%s side_channel=%s engine_id=%s%s\n", e.URL(), e.AdminURL(), e.SideChannelAddr(), e.EngineID(), attURL)
			waitSignal(c.Context())
			return e.Close()
		}),
	}
	f.register(c, true)
	return c
}

func newSimFleetCmd() *cobra.Command {
	f := &simFlags{}
	var n int
	c := &cobra.Command{
		Use:   "sim-fleet",
		Short: "Serve N simulated vLLM engines on free loopback ports and print their URLs",
		Args:  cobra.NoArgs,
		RunE: f.withSetup(func(c *cobra.Command, st *profile.Store) error {
			if n <= 0 {
				return cli.Invalid(fmt.Errorf("--engines must be ≥ 1, got %d", n))
			}
			var cfgErr error
			fl, err := simengine.StartFleet(n, simengine.Config{}, func(i int) simengine.Config {
				cfg, err := f.config(st, i)
				if err != nil && cfgErr == nil {
					cfgErr = err
				}
				return cfg
			})
			if cfgErr != nil {
				return cli.Invalid(cfgErr)
			}
			if err != nil {
				return startErr(err)
			}
			for i, e := range fl.Engines {
				attURL := ""
				if f.attest {
					s, suffix, err := sidecarBanner(e, f.host, 0, nil)
					if err != nil {
						fl.Close()
						return err
					}
					defer s.Close()
					attURL = suffix
				}
				fmt.Fprintf(c.OutOrStdout(), "engine-%d %s admin=%s engine_id=%s%s\n", i, e.URL(), e.AdminURL(), e.EngineID(), attURL)
			}
			waitSignal(c.Context())
			return fl.Close()
		}),
	}
	f.register(c, false)
	c.Flags().IntVar(&n, "engines", 2, "number of engines")
	return c
}

// sidecarBanner starts e's attestation sidecar and returns it with the
// banner's " attestation_url=…" suffix; a failure to start is exit 1.
func sidecarBanner(e *simengine.Engine, host string, port int, log *slog.Logger) (*attest.Server, string, error) {
	s, err := startSidecar(context.Background(), e, host, port, log)
	if err != nil {
		return nil, "", cli.Failed(err)
	}
	return s, " attestation_url=" + s.AttestationURL(), nil
}

func startErr(err error) error {
	var se *simengine.StartupError
	if errors.As(err, &se) {
		return cli.Failed(err)
	}
	return cli.Failed(err)
}

// waitSignal blocks until SIGINT, SIGTERM or ctx ends.
func waitSignal(ctx context.Context) {
	ctx, stop := cli.UntilSignal(ctx)
	defer stop()
	<-ctx.Done()
}
