package router

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/ui"
)

// dashboardRoutes serve the live dashboard (internal/ui) and send GET /
// to it. The page and its feed only read; lifecycle actions keep their
// admin-guarded routes.
func (r *Router) dashboardRoutes() []route {
	r.ui = ui.New(dashboardSource{r}, ui.Options{})
	h := r.ui.Handler()
	return []route{
		{"GET /{$}", http.HandlerFunc(ui.Redirect)},
		{"GET " + ui.Path, h},
		{"GET " + ui.Path + "/", h},
		{"GET " + ui.Path + "/feed", r.boundFeed(h, new(httpguard.Slots))},
	}
}

// boundFeed bounds the dashboard's live feed, a response that lasts as
// long as the viewer stays: at most FeedsPerClient feeds per address and
// Feeds in all (429, 503 beyond), and every event written within
// FeedWriteTimeout, so a viewer that stops reading is dropped then
// instead of holding its goroutine and connection. What a viewer can
// make the router buffer is the server's fixed write buffer (the view
// itself is encoded once and shared) plus the kernel's socket buffer.
func (r *Router) boundFeed(next http.Handler, feeds *httpguard.Slots) http.Handler {
	o := r.httpOpts
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ip := httpguard.ClientIP(req)
		switch feeds.Claim(ip, o.FeedsPerClient, o.Feeds) {
		case httpguard.ClientFull:
			openai.Overloaded("feed_limit", fmt.Sprintf("%d dashboard feeds from %s are already open (per-client limit); "+
				"close another dashboard tab first", o.FeedsPerClient, ip), 5).Write(w)
			return
		case httpguard.AllFull:
			openai.Unavailable("feed_limit", fmt.Sprintf("%d dashboard feeds are already open (server-wide limit); "+
				"close a dashboard elsewhere, or read /narwhal/ui/view.json instead", o.Feeds)).Write(w)
			return
		}
		defer feeds.Done(ip)
		if tc, ok := requestConn(req).(*net.TCPConn); ok {
			// The kernel would grow a stalled viewer's send buffer to
			// megabytes; the feed needs about one view at a time.
			_ = tc.SetWriteBuffer(feedSocketBuffer)
		}
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		fw := &feedWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: o.FeedWriteTimeout, cancel: cancel}
		next.ServeHTTP(fw, req.WithContext(ctx))
	})
}

// feedSocketBuffer is the send buffer of a feed's connection (Linux
// doubles it for bookkeeping): one view of a large fleet with its fifty
// latest failures (about 15 KiB); a reader drains it at once.
const feedSocketBuffer = 16 << 10

// feedWriter gives every write of the feed its own deadline; a write or
// flush that fails (the deadline passed: the viewer stopped reading)
// ends the feed at once rather than at its next tick.
type feedWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	d      time.Duration
	cancel context.CancelFunc
}

func (f *feedWriter) Write(p []byte) (int, error) {
	if err := f.rc.SetWriteDeadline(time.Now().Add(f.d)); err != nil {
		// A writer that cannot take a deadline cannot bound a stalled
		// viewer: no feed rather than one that may hang forever.
		f.cancel()
		return 0, err
	}
	n, err := f.ResponseWriter.Write(p)
	if err != nil {
		f.cancel()
	}
	return n, err
}

// Flush sends the event now, under the deadline its Write set.
func (f *feedWriter) Flush() {
	if err := f.rc.Flush(); err != nil {
		f.cancel()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (f *feedWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// dashboardSource is the router as the dashboard reads it.
type dashboardSource struct{ r *Router }

// Snapshot reads the state document, the latency histograms, the
// journal's latest failures and each engine's lifecycle state and process
// generation.
func (s dashboardSource) Snapshot() ui.Snapshot {
	r := s.r
	snap := ui.Snapshot{State: r.state(), Lifecycle: map[string]string{}, Generation: r.life.ProcessStarts(), Tier: map[string]string{}}
	for iid, t := range snap.State.Evidence.Endpoints {
		snap.Tier[iid] = t.Tier // the evidence pass's tiers (tierd.Runner), when it runs
	}
	snap.TTFT, snap.TPOT = r.metrics.Latency()
	for _, rec := range r.life.Records() {
		snap.Lifecycle[rec.IID] = string(rec.State)
	}
	if r.journal != nil {
		snap.Failures = r.journal.RecentFailures()
	} else {
		snap.Failures = []*journal.RequestRow{}
	}
	r.locked(func() { snap.Now = r.now() })
	return snap
}
