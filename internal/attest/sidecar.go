package attest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// IdentityReader reads an engine's live identity; *vllm.Client is one.
type IdentityReader interface {
	Identity(ctx context.Context) (vllm.Identity, error)
}

// Options configure a sidecar.
type Options struct {
	Document   *Document
	Engine     IdentityReader
	EngineBase string        // for the sources entries and messages
	Timeout    time.Duration // per identity read; default 5 s
	Logger     *slog.Logger
	// Residency is the engine's prefix-cache index, fed from its KV cache
	// events (residency.Follow); nil: the engine publishes none (404).
	Residency *residency.Index
	// Accelerator observes the engine host's accelerators once, at start;
	// nil: nvidia-smi when present, else the engine's own device report
	// (SourceFor "auto").
	Accelerator AcceleratorSource
}

// Sidecar vouches for one engine process: it binds to the identity read at
// start-up and serves the payload only while every re-read matches it.
type Sidecar struct {
	opts    Options
	bound   vllm.Identity
	payload []byte
	digest  string
	acc     Accelerator

	mu      sync.Mutex
	changed string // non-empty once the process changed: latched until restart
}

// ErrVersionMismatch is returned by New when the engine runs a vLLM
// version other than the document's contract.vllm_version.
var ErrVersionMismatch = errors.New("engine version differs from the attestation document")

// New reads the engine identity, checks the version against the document
// and assembles the payload. Every error is an operation failure (exit 1):
// the document itself was validated by Load.
func New(ctx context.Context, o Options) (*Sidecar, error) {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sidecar{opts: o}
	id, err := s.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read engine identity from %s: %w (start the sidecar after vLLM is serving)", o.EngineBase, err)
	}
	if !vllm.SameBuild(id.Version, o.Document.Contract.VLLMVersion) {
		return nil, fmt.Errorf("%w: engine %s runs vLLM %q, document expects %q", ErrVersionMismatch, o.EngineBase, id.Version, o.Document.Contract.VLLMVersion)
	}
	acc := s.accelerator(ctx)
	p, raw, err := Assemble(o.Document, id, acc, o.EngineBase)
	if err != nil {
		return nil, err
	}
	s.bound, s.payload, s.digest, s.acc = id, raw, p.AttestationDigest, acc
	return s, nil
}

// accelerator observes with the configured source, or the default one.
func (s *Sidecar) accelerator(ctx context.Context) Accelerator {
	src := s.opts.Accelerator
	if src == nil {
		dr, _ := s.opts.Engine.(DevicesReader)
		src, _ = SourceFor("auto", NvidiaSMI{}, EngineDevices{Engine: dr, EngineBase: s.opts.EngineBase, Timeout: s.opts.Timeout})
	}
	a := src.Accelerator(ctx)
	if !a.Known() {
		s.opts.Logger.Warn("accelerator unknown; preflight will warn instead of comparing it with the fleet's hardware",
			"engine", s.opts.EngineBase, "source", a.Source, "detail", a.Detail)
	}
	return a
}

// Accelerator is the observation the payload carries.
func (s *Sidecar) Accelerator() Accelerator { return s.acc }

// Digest is the attestation_digest served.
func (s *Sidecar) Digest() string { return s.digest }

// Bound is the identity the sidecar vouches for.
func (s *Sidecar) Bound() vllm.Identity { return s.bound }

func (s *Sidecar) read(ctx context.Context) (vllm.Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	id, e := s.opts.Engine.Identity(ctx)
	if e != nil {
		return vllm.Identity{}, e
	}
	return id, nil
}

// Handler serves GET /health and GET /v1/attestation. Each request re-reads
// the identity first: unreadable → 503 (may recover), changed → 503 for
// good, because a new process is not the one the payload describes.
func (s *Sidecar) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if s.gate(w, r) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}
	})
	mux.HandleFunc("GET /v1/attestation", func(w http.ResponseWriter, r *http.Request) {
		if s.gate(w, r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(s.payload)
		}
	})
	s.residencyRoutes(mux)
	return mux
}

// gate answers 503 and returns false unless the engine is still the bound
// process.
func (s *Sidecar) gate(w http.ResponseWriter, r *http.Request) bool {
	if msg := s.changedMsg(); msg != "" {
		writeDetail(w, msg)
		return false
	}
	id, err := s.read(r.Context())
	if err != nil {
		writeDetail(w, "engine identity unreadable: "+err.Error())
		return false
	}
	if !id.SameProcess(s.bound) {
		s.latch(id)
		writeDetail(w, s.changedMsg())
		return false
	}
	return true
}

func (s *Sidecar) changedMsg() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Sidecar) latch(id vllm.Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == "" {
		s.changed = "engine process changed; restart the attestation sidecar"
		s.opts.Logger.Warn("engine process changed; answering 503 until restarted",
			"engine", s.opts.EngineBase, "bound_version", s.bound.Version, "bound_start", s.bound.ProcessStart,
			"live_version", id.Version, "live_start", id.ProcessStart)
	}
}

func writeDetail(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is a sidecar listening on an address.
type Server struct {
	*Sidecar
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}
	stopKV func() // stops FollowKV; nil when not following
}

// Listen binds addr ("127.0.0.1:0" picks a free port) and serves until
// Close.
func (s *Sidecar) Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("attestation sidecar: listen on %s: %w (pick another --port)", addr, err)
	}
	srv := &Server{Sidecar: s, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(srv.done)
		_ = srv.srv.Serve(ln)
	}()
	return srv, nil
}

// URL is the sidecar's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// AttestationURL is the value for the engine's attestation_url.
func (s *Server) AttestationURL() string { return s.URL() + "/v1/attestation" }

// Close stops serving, waits for the serve loop and releases the engine
// client's idle connections.
func (s *Server) Close() error {
	if s.stopKV != nil {
		s.stopKV()
	}
	err := s.srv.Close()
	<-s.done
	if c, ok := s.opts.Engine.(interface{ Close() }); ok {
		c.Close()
	}
	return err
}

// Serve is the whole sidecar in one call, for in-process fleets (tests,
// narwhal-engine sim --attest-port, make run): read the identity of the
// engine at engineBase, bind addr and serve doc. Close the server to stop
// it. The accelerator comes from the engine's own device report only: an
// in-process engine is simulated, and the host's real GPUs (nvidia-smi)
// are not its devices.
func Serve(ctx context.Context, doc *Document, engineBase, addr string, log *slog.Logger) (*Server, error) {
	s, c, err := inProcess(ctx, doc, engineBase, log)
	if err != nil {
		return nil, err
	}
	srv, err := s.Listen(addr)
	if err != nil {
		c.Close()
		return nil, err
	}
	return srv, nil
}

// inProcess builds the sidecar of Serve and ServeKV.
func inProcess(ctx context.Context, doc *Document, engineBase string, log *slog.Logger) (*Sidecar, *vllm.Client, error) {
	c := vllm.NewClient(engineBase, vllm.Options{ConnectTimeout: 2 * time.Second})
	s, err := New(ctx, Options{Document: doc, Engine: c, EngineBase: engineBase, Logger: log,
		Accelerator: EngineDevices{Engine: c, EngineBase: engineBase, Timeout: 5 * time.Second}})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return s, c, nil
}
