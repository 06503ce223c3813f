package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// Each simulated engine publishing KV events leaves zmq4's PUB writer
// parked (kvevents.ParkedPubWriter).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(kvevents.ParkedPubWriter))
}

const model = "sim-model"

// harness is a router in front of simulated engines, with its journal.
type harness struct {
	t       *testing.T
	engines *simengine.Fleet
	cfg     *fleet.Config
	store   *profile.Store // the router's profiles
	router  *Router
	srv     *httptest.Server
	jpath   string
	jw      *journal.Writer

	sidecars []*attest.Server // by engine index, when started

	mu   sync.Mutex
	rids []string // every x-request-id the router answered with
}

// newHarness starts one engine per role, in iid order p0.., d0.. and a
// router; mod adjusts the fleet and opts the router's options before the
// router starts.
func newHarness(t *testing.T, roles []fleet.Role, mod func(*fleet.Config), opts ...func(*Options)) *harness {
	t.Helper()
	return startHarness(t, roles, harnessOptions{mod: mod, router: opts})
}

// harnessOptions are the less common knobs of startHarness.
type harnessOptions struct {
	mod      func(*fleet.Config)
	engine   func(*simengine.Config) // adjusts every engine's configuration
	sidecars bool                    // an attestation sidecar per engine, its attestation_url set
	logger   *slog.Logger
	lookup   fleet.LookupFunc                       // the router's environment (engine credential)
	router   []func(*Options)                       // adjust the router's options last
	built    func(*Router)                          // sees the router after New, before Start
	store    func(*profile.Store, *simengine.Fleet) // adjusts the profile rows before the router starts
}

func startHarness(t *testing.T, roles []fleet.Role, o harnessOptions) *harness {
	t.Helper()
	base := simengine.Config{Model: model, Profile: simengine.DefaultProfile("x")}
	if o.engine != nil {
		o.engine(&base)
	}
	fl, err := simengine.StartFleet(len(roles), base, nil)
	if err != nil {
		t.Fatal(err)
	}
	mod := o.mod
	cfg := fleet.Defaults()
	cfg.Model = model
	cfg.SLO = fleet.SLO{TTFT: 2, TPOT: 0.1}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
	np, nd := 0, 0
	for i, role := range roles {
		iid := fmt.Sprintf("d%d", nd)
		if role == fleet.Prefill {
			iid = fmt.Sprintf("p%d", np)
			np++
		} else {
			nd++
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: fl.URLs()[i], Role: role})
		row := simengine.DefaultProfile(iid)
		store.Profiles = append(store.Profiles, row)
	}
	h := &harness{t: t, engines: fl, cfg: &cfg, store: store, jpath: filepath.Join(t.TempDir(), "journal.jsonl")}
	if o.sidecars {
		h.startSidecars()
	}
	cfg.Serving.MaxAttempts = 2
	cfg.Serving.HandoffTimeoutS = 20
	cfg.Engine.FirstTokenTimeoutS = 5
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate("test"); err != nil {
		fl.Close()
		t.Fatal(err)
	}
	h.jw, err = journal.Open(h.jpath, journal.Options{Source: "sha256:" + strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	ro := Options{Journal: h.jw, Rng: ports.NewSeededRng(1), AdminOpen: true, Logger: o.logger, Lookup: o.lookup}
	for _, f := range o.router {
		f(&ro)
	}
	if o.store != nil {
		o.store(store, fl)
	}
	h.router, err = New(&cfg, store, ro)
	if err != nil {
		t.Fatal(err)
	}
	if o.built != nil {
		o.built(h.router)
	}
	h.router.Start()
	h.srv = httptest.NewServer(h.router)
	t.Cleanup(h.close)
	return h
}

// close stops everything and checks the journal: every request the router
// answered has exactly one terminal row, and no row is unaccounted for.
func (h *harness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.router.Shutdown(ctx); err != nil {
		h.t.Errorf("shutdown: %v", err)
	}
	h.srv.Close()
	h.router.Close()
	h.jw.Close()
	h.engines.Close()
	j, err := journal.ReadFile(h.jpath)
	if err != nil {
		h.t.Fatalf("journal: %v", err)
	}
	counts := journal.Terminals(j.Requests)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rid := range h.rids {
		if counts[rid] != 1 {
			h.t.Errorf("request %s has %d terminal journal rows, want exactly 1", rid, counts[rid])
		}
	}
	if len(counts) != len(h.rids) || len(j.Requests) != len(h.rids) {
		h.t.Errorf("journal has %d rows for %d rids; the router answered %d requests", len(j.Requests), len(counts), len(h.rids))
	}
}

// row returns the journal row of rid, after the router settled it.
func (h *harness) row(rid string) *journal.RequestRow {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		j, err := journal.ReadFile(h.jpath)
		if err != nil && !errors.Is(err, journal.ErrTruncated) { // a row being written reads as a truncated tail
			h.t.Fatal(err)
		}
		for _, r := range j.Requests {
			if r.Request.RID == rid {
				return r.Request
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("no journal row for %s", rid)
	return nil
}

// post sends a completion request and reads the whole response.
func (h *harness) post(ctx context.Context, path string, body any) (*http.Response, []byte) {
	h.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	h.noteRID(resp)
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func (h *harness) noteRID(resp *http.Response) {
	rid := resp.Header.Get("X-Narwhal-Request-Id") // the router's id; X-Request-Id echoes a client's own
	if rid == "" {
		rid = resp.Header.Get("X-Request-Id")
	}
	if rid == "" {
		h.t.Errorf("response %d has no x-request-id", resp.StatusCode)
		return
	}
	h.mu.Lock()
	h.rids = append(h.rids, rid)
	h.mu.Unlock()
}

// direct runs the request on one engine without disaggregation: the
// reference output.
func direct(t *testing.T, url, path string, body map[string]any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("direct run: %d %s", resp.StatusCode, out)
	}
	return out
}

var (
	pd   = []fleet.Role{fleet.Prefill, fleet.Decode}
	ppdd = []fleet.Role{fleet.Prefill, fleet.Prefill, fleet.Decode, fleet.Decode}
)

// startSidecars serves an attestation sidecar beside every engine and sets
// its attestation_url (tests with a contract use simengine's).
func (h *harness) startSidecars() {
	h.t.Helper()
	h.sidecars = make([]*attest.Server, len(h.engines.Engines))
	for i := range h.engines.Engines {
		h.restartSidecar(i)
	}
}

// restartSidecar (re)starts engine i's sidecar on the same address, bound
// to the engine's current process, as an operator does after restarting
// the engine.
func (h *harness) restartSidecar(i int) {
	h.t.Helper()
	addr := "127.0.0.1:0"
	if old := h.sidecars[i]; old != nil {
		addr = strings.TrimPrefix(old.URL(), "http://")
		old.Close()
	}
	e := h.engines.Engines[i]
	s := simkit.Sidecar(h.t, e, addr)
	h.sidecars[i] = s
	h.cfg.Engines[i].AttestationURL = s.AttestationURL()
}
