package ui

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Path is where the dashboard lives on the router.
const Path = "/narwhal/ui"

// Handler serves the page (GET /narwhal/ui), its assets
// (/narwhal/ui/app.js, app.css), one view as JSON (/narwhal/ui/view.json)
// and the live feed (/narwhal/ui/feed, text/event-stream, one "view"
// event per refresh).
func (h *Hub) Handler() http.Handler {
	sub, _ := fs.Sub(assets, "assets") // the embedded directory exists
	static := http.StripPrefix(Path+"/", http.FileServer(http.FS(sub)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		guard(w)
		http.ServeFileFS(w, r, sub, "index.html")
	})
	mux.HandleFunc("GET "+Path+"/feed", h.serveFeed)
	mux.HandleFunc("GET "+Path+"/view.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(h.encoded())
	})
	mux.Handle("GET "+Path+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guard(w)
		// A name fs.FS cannot hold (invalid UTF-8 such as %c0%ae, dot
		// segments) is not an asset: 404, where the file server would
		// answer its open error as a 500.
		if name := strings.TrimPrefix(r.URL.Path, Path+"/"); name != "" && !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		static.ServeHTTP(w, r)
	}))
	return mux
}

// guard: the page loads nothing from elsewhere and runs no inline script.
func guard(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// Redirect answers GET / with the dashboard's address.
func Redirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, Path, http.StatusFound)
}

// serveFeed streams a view every refresh until the client leaves.
func (h *Hub) serveFeed(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // a buffering proxy would hold the events back
	t := time.NewTicker(h.o.Refresh)
	defer t.Stop()
	fmt.Fprintf(w, "retry: %d\n\n", 2*h.o.Refresh.Milliseconds())
	for {
		if _, err := fmt.Fprintf(w, "event: view\ndata: %s\n\n", h.encoded()); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-h.closed:
			return
		case <-t.C:
		}
	}
}
