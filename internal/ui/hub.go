// Package ui is the router's built-in live dashboard, /narwhal/ui: one
// page from embedded assets (no CDN, no build step) fed by a server-sent
// events stream of View documents built from the router's state, its
// latency histograms and the journal's latest failures. It is read-only:
// the lifecycle actions stay behind the admin token on their own routes.
//
//	hub := ui.New(source, ui.Options{})
//	go hub.Run(ctx)                       // samples history once a second
//	mux.Handle("GET /narwhal/ui/", hub.Handler())
package ui

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Options tune the hub; zero values take the defaults.
type Options struct {
	Refresh time.Duration // feed period and sampling step; default 1 s
	History time.Duration // how far back windows and charts reach; default 5 min
	Step    time.Duration // chart resolution; default 10 s
	Now     func() time.Time
}

// Hub builds Views for every viewer from one sampled history.
type Hub struct {
	src Source
	o   Options

	mu      sync.Mutex // guards hist, reasons, seq and the cached view
	hist    ring
	reasons map[flipKey]string
	lastAt  float64 // the last decision whose reason was taken
	cached  []byte
	cachedT time.Time

	closed    chan struct{} // closed by Close: feeds end
	closeOnce sync.Once
}

// New returns a hub reading src.
func New(src Source, o Options) *Hub {
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.History <= 0 {
		o.History = 5 * time.Minute
	}
	if o.Step <= 0 {
		o.Step = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Hub{src: src, o: o, reasons: map[flipKey]string{}, closed: make(chan struct{})}
}

// Close ends every open feed (a router shutting down must not wait for
// dashboards); the page reconnects to whichever router serves next.
func (h *Hub) Close() { h.closeOnce.Do(func() { close(h.closed) }) }

// Run samples once per refresh until ctx ends, so the windows cover the
// last minutes even before anyone opens the page.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(h.o.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.encoded()
		}
	}
}

// View samples the router and builds the current view.
func (h *Hub) View() View {
	s := h.src.Snapshot()
	now := h.o.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.viewLocked(&s, now)
}

// encoded is the current view as JSON, built at most once per half
// refresh however many viewers ask.
func (h *Hub) encoded() []byte {
	now := h.o.Now()
	h.mu.Lock()
	if h.cached != nil && now.Sub(h.cachedT) < h.o.Refresh/2 {
		b := h.cached
		h.mu.Unlock()
		return b
	}
	h.mu.Unlock()
	v := h.View()
	b, _ := json.Marshal(v) // typed structs of plain values: cannot fail
	h.mu.Lock()
	h.cached, h.cachedT = b, now
	h.mu.Unlock()
	return b
}

func (h *Hub) viewLocked(s *Snapshot, now time.Time) View {
	st := &s.State
	cur := sample{at: now, ended: ended(st), met: st.SLOMet, served: st.Served, ttft: s.TTFT, tpot: s.TPOT}
	if n := len(h.hist.s); n == 0 || now.Sub(h.hist.s[n-1].at) >= h.o.Refresh*9/10 {
		h.hist.add(cur, int(h.o.History/h.o.Refresh)+1)
	}
	if d := st.Control.LastDecision; d != nil && d.Flip != nil && d.At != h.lastAt {
		h.reasons[flipKey{d.Flip.At, d.Flip.IID}] = d.Reason
		h.lastAt = d.At
	}
	return View{
		At: now.UTC(), SLO: st.SLO, Engines: engines(s),
		Pools: Pools{Prefill: len(st.Pools.Prefill), Decode: len(st.Pools.Decode), PrefillLoad: st.Load.Prefill,
			DecodeLoad: st.Load.Decode, MinPrefill: st.MinPrefill, MinDecode: st.MinDecode, Expand: st.Thresholds.Expand,
			Queued: st.Admission.DeadlineQueue.Depth, QueueLimit: st.Admission.DeadlineQueue.Limit,
			QueueDrainS: st.Admission.DeadlineQueue.DrainS},
		Last1m: window(h.hist.since(now.Add(-time.Minute)), cur),
		Last5m: window(h.hist.since(now.Add(-5*time.Minute)), cur),
		Series: h.hist.series(h.stepLocked(now)), Flips: flips(st.Flips, h.reasons),
		Drops: drops(st), Failures: failures(s.Failures),
		Totals: Totals{Offered: st.Offered, Served: st.Served, SLOMet: st.SLOMet,
			Inflight: st.Admission.Inflight, Limit: st.Admission.Limit, Now: s.Now},
	}
}

// stepLocked is the charts' resolution: Step, finer while the history is
// short (about 30 points over what there is, never below one refresh), so
// a fresh router draws lines at once.
func (h *Hub) stepLocked(now time.Time) time.Duration {
	span := now.Sub(h.hist.s[0].at)
	return min(h.o.Step, max(h.o.Refresh, span/30))
}
