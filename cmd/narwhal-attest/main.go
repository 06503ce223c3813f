// Command narwhal-attest is the attestation sidecar run beside each
// contracted engine: it serves the engine's attested contract
// (narwhal.attestation payload v2: contract, live identity and the engine
// host's observed accelerator) bound to the engine process it saw at
// start-up, and answers 503 on every route once that process changes.
package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/cli"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func main() { cli.Main(newRoot()) }

type flags struct {
	document, engineBase, host string
	accelSource, nvidiaSMI     string
	port                       int
	timeoutS                   float64
	kv                         kvFlags
	// ready, when set, receives the listening server (tests).
	ready func(*attest.Server)
}

func newRoot() *cobra.Command { return newRootWith(&flags{}) }

func newRootWith(f *flags) *cobra.Command {
	root := cli.NewRoot("narwhal-attest", "Attestation sidecar: serve one engine's attested contract, 503 once its process changes")
	root.Args = cobra.NoArgs
	root.RunE = func(c *cobra.Command, _ []string) error { return run(c, f) }
	fs := root.Flags()
	fs.StringVar(&f.document, "document", "", "attestation document (narwhal.attestation v1), e.g. runs/engine-launch-*/engine-attestation.json")
	fs.StringVar(&f.engineBase, "engine-base", "", "engine base URL serving /version and /metrics, e.g. http://127.0.0.1:8000")
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to bind")
	fs.IntVar(&f.port, "port", 8010, "port to bind (0 picks a free one)")
	fs.Float64Var(&f.timeoutS, "timeout-s", 5.0, "engine identity read timeout, seconds")
	fs.StringVar(&f.accelSource, "accelerator-source", "auto", "where the accelerator is observed, once at start: auto (nvidia-smi when on PATH, else the engine's GET /v1/server/devices), nvidia-smi, engine, or none (reported unknown)")
	fs.StringVar(&f.nvidiaSMI, "nvidia-smi", "nvidia-smi", "the nvidia-smi executable; run the sidecar with the engine's own device allocation, since every GPU it sees is counted")
	f.kv.register(fs)
	return root
}

func (f *flags) check() error {
	switch {
	case f.document == "":
		return cli.Usage("--document is required: name the engine's attestation document")
	case f.engineBase == "":
		return cli.Usage("--engine-base is required: the engine URL serving /version and /metrics")
	case f.port < 0 || f.port > 65535:
		return cli.Usage("--port must be 0..65535, got %d", f.port)
	case !(f.timeoutS > 0):
		return cli.Usage("--timeout-s must be positive, got %v", f.timeoutS)
	}
	if _, err := attest.SourceFor(f.accelSource, attest.NvidiaSMI{}, attest.EngineDevices{}); err != nil {
		return cli.Usage("--accelerator-source: %v", err)
	}
	return f.kv.check()
}

func run(c *cobra.Command, f *flags) error {
	if err := f.check(); err != nil {
		return err
	}
	doc, err := attest.Load(f.document)
	if err != nil {
		return cli.Invalid(err)
	}
	log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
	base := strings.TrimRight(f.engineBase, "/")
	client := vllm.NewClient(base, vllm.Options{ConnectTimeout: 5 * time.Second})
	ctx, stop := cli.UntilSignal(c.Context())
	defer stop()
	timeout := time.Duration(f.timeoutS * float64(time.Second))
	accel, _ := attest.SourceFor(f.accelSource, attest.NvidiaSMI{Path: f.nvidiaSMI, Timeout: 2 * timeout},
		attest.EngineDevices{Engine: client, EngineBase: base, Timeout: timeout})
	sc, err := attest.New(ctx, attest.Options{Document: doc, Engine: client, EngineBase: base,
		Timeout: timeout, Logger: log, Accelerator: accel})
	if err != nil {
		client.Close()
		return cli.Failed(err)
	}
	sub, hasher, err := f.kv.subscription()
	if err != nil {
		client.Close()
		return cli.Invalid(err)
	}
	if hasher != nil {
		sc.EnableResidency(hasher)
	}
	srv, err := sc.Listen(cli.Addr(f.host, f.port))
	if err != nil {
		client.Close()
		return cli.Failed(err)
	}
	if hasher != nil {
		srv.FollowKV(sub)
	}
	acc := sc.Accelerator()
	fmt.Fprintf(c.OutOrStdout(), "narwhal-attest: %s attests %s (vLLM %s, process %.6f, accelerator %s, %s)\n",
		srv.AttestationURL(), base, sc.Bound().Version, sc.Bound().ProcessStart, acc.String(), sc.Digest())
	if f.ready != nil {
		f.ready(srv)
	}
	<-ctx.Done()
	return srv.Close()
}
