package router

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve runs r on ln until ctx ends, then drains: new requests are refused,
// in-flight ones get up to graceful to finish, and whatever is left is cut
// off (each still ends in its journal row). It returns nil after a clean
// drain.
func Serve(ctx context.Context, ln net.Listener, r *Router, graceful time.Duration) error {
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: r.httpOpts.ReadHeaderTimeout,
		IdleTimeout:       r.httpOpts.IdleTimeout,
		// No ReadTimeout: it would also cut the server's background read
		// that notices a client leaving mid-stream. Completion bodies have
		// their own deadline (httpguard.Options.BodyReadTimeout).
		// No write timeout: streams last as long as serving.request_timeout_s;
		// the dashboard's feed bounds each event itself (boundFeed).
		ConnContext: withConn,
	}
	r.Start()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		r.Close()
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.Background(), graceful)
	defer cancel()
	drainErr := r.Shutdown(dctx)
	// Idle keep-alive connections close now; active ones were waited for.
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		drainErr = errors.Join(drainErr, err)
	}
	r.Close()
	return drainErr
}

// connKey carries a request's connection in its context (withConn), for
// the handlers that size its socket (boundFeed).
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// requestConn is the connection req arrived on, when it was served by
// Serve (nil under a server without withConn).
func requestConn(req *http.Request) net.Conn {
	c, _ := req.Context().Value(connKey{}).(net.Conn)
	return c
}
