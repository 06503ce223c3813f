package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one bench run.
type Config struct {
	Router   string // base URL, no trailing slash
	Model    string // "" asks the router's /v1/models
	Schedule Schedule
	Seed     uint64
	// Limit is the most requests in flight at once (0: 1024); an offer
	// due while it is full is recorded as client_limit, not sent.
	Limit int
	// RequestTimeout bounds each request (0: 120 s); DrainTimeout bounds
	// the wait for in-flight requests after the last offer (0: the
	// request timeout). The run never lasts longer than the offer window
	// plus DrainTimeout.
	RequestTimeout, DrainTimeout time.Duration
	Out                          io.Writer // JSONL results: header, then one record per request
	Progress                     io.Writer // progress bar; nil for none
	// Client is the HTTP client (tests); nil builds one sized for Limit.
	Client *http.Client
	// MaxRetries is how often a call is retried as OpenAI's SDKs retry it
	// (retry.go); bench's default is theirs, DefaultMaxRetries.
	MaxRetries int
}

// Generator runs a Config.
type Generator struct {
	cfg    Config
	client *http.Client
	run    string
	start  time.Time
	out    *sink
	slo    *SLO

	sent, finished, failed, inflight atomic.Int64

	mu      sync.Mutex // guards records and rng
	records []Record
	rng     *rand.Rand // the retries' jitter
}

// New checks cfg and prepares a run.
func New(cfg Config) (*Generator, error) {
	cfg.Router = strings.TrimRight(cfg.Router, "/")
	if !strings.HasPrefix(cfg.Router, "http://") && !strings.HasPrefix(cfg.Router, "https://") {
		return nil, fmt.Errorf("--router %q: give the router's base URL, e.g. http://127.0.0.1:8000", cfg.Router)
	}
	if len(cfg.Schedule.Offers) == 0 {
		return nil, fmt.Errorf("the schedule offers no request: raise --rate or --duration, or pass a trace with rows")
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 1024
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 120 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = cfg.RequestTimeout
	}
	g := &Generator{cfg: cfg, client: cfg.Client, out: &sink{w: cfg.Out},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x7e7141e5))}
	if g.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = cfg.Limit, cfg.Limit
		g.client = &http.Client{Transport: tr}
	}
	g.run = fmt.Sprintf("bench-%d-%08x", time.Now().Unix(), rand.Uint32())
	return g, nil
}

// Run offers the schedule and returns every record, in end order. It
// ends by the offer window plus the drain timeout at the latest; ctx
// cancels it sooner (records of unsent offers are then not written).
func (g *Generator) Run(ctx context.Context) ([]Record, error) {
	if err := g.prepare(ctx); err != nil {
		return nil, err
	}
	bound := time.Duration(g.cfg.Schedule.DurationS()*float64(time.Second)) + g.cfg.DrainTimeout
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	g.start = time.Now()
	g.out.write(g.header(bound))
	stopBar := g.progress()
	var wg sync.WaitGroup
	g.offer(ctx, &wg)
	wg.Wait()
	stopBar()
	if g.out.err != nil {
		return g.records, fmt.Errorf("write bench results: %w", g.out.err)
	}
	return g.records, nil
}

// offer sends each offer at its time, from one goroutine so that the
// schedule never depends on how requests fare.
func (g *Generator) offer(ctx context.Context, wg *sync.WaitGroup) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i, o := range g.cfg.Schedule.Offers {
		due := g.start.Add(time.Duration(o.At * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				g.notSent(g.cfg.Schedule.Offers[i:], i)
				return
			case <-timer.C:
			}
		}
		rec := Record{Kind: "request", ID: fmt.Sprintf("%s-%d", g.run, i), Step: o.Step, ScheduledS: o.At,
			InputLen: o.InputLen, WantedLen: o.OutputLen}
		if g.inflight.Load() >= int64(g.cfg.Limit) {
			rec.Outcome = OutcomeClientLimit
			g.finish(rec)
			continue
		}
		g.inflight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer g.inflight.Add(-1)
			g.send(ctx, rec, due)
		}()
	}
}

// notSent records the offers the run's bound (or a cancel) left unsent,
// so that every scheduled offer has a record.
func (g *Generator) notSent(offers []Offer, first int) {
	for k, o := range offers {
		g.finish(Record{Kind: "request", ID: fmt.Sprintf("%s-%d", g.run, first+k), Step: o.Step, ScheduledS: o.At,
			InputLen: o.InputLen, WantedLen: o.OutputLen, Outcome: OutcomeNotSent})
	}
}

func (g *Generator) send(ctx context.Context, rec Record, due time.Time) {
	now := time.Now()
	rec.SentS = ptr(now.Sub(g.start).Seconds())
	rec.ScheduleLag = max(0, now.Sub(due).Seconds())
	g.sent.Add(1)
	body, _ := json.Marshal(completionBody{Model: g.cfg.Model, Prompt: Prompt(rec.ID, rec.InputLen),
		MaxTokens: rec.WantedLen, MinTokens: rec.WantedLen, IgnoreEOS: true, Stream: true,
		StreamOptions: streamOptions{IncludeUsage: true}})
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	g.do(rctx, &rec, body)
	g.finish(rec)
}

func (g *Generator) finish(rec Record) {
	if rec.Outcome != OutcomeCompleted {
		g.failed.Add(1)
	}
	g.finished.Add(1)
	g.out.write(rec)
	g.mu.Lock()
	g.records = append(g.records, rec)
	g.mu.Unlock()
}

func (g *Generator) header(bound time.Duration) Header {
	return Header{Schema: Schema, SchemaVersion: SchemaVersion, Kind: "header", Run: g.run, Router: g.cfg.Router,
		Model: g.cfg.Model, Started: g.start.UTC().Format(time.RFC3339Nano), Seed: g.cfg.Seed,
		Source: g.cfg.Schedule.Source, SLO: g.slo, Steps: g.cfg.Schedule.Steps, LimitN: g.cfg.Limit,
		BoundS: bound.Seconds()}
}
