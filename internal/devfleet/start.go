package devfleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// startBound is how long Start waits for the router to serve. A fleet
// is ready in 2-5 s alone; under -race beside the whole suite on two
// cores CI saw more than 15 s, so the bound is a hang guard, not a
// timing claim.
const startBound = 90 * time.Second

// Running is a dev fleet Start runs in the background.
type Running struct {
	Base   string // the router's base URL
	cancel context.CancelFunc
	done   chan error
}

// Start runs a dev fleet in the background (Run with o, banner to out)
// and returns once its router serves; Stop ends it. It fails when the
// fleet does not start, or is not serving within 30 s.
func Start(o Options, out io.Writer) (*Running, error) {
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	given := o.Ready
	o.Ready = func(u string) {
		if given != nil {
			given(u)
		}
		ready <- u
	}
	go func() { done <- Run(ctx, o, out) }()
	select {
	case u := <-ready:
		return &Running{Base: u, cancel: cancel, done: done}, nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("stopped before it served")
		}
		return nil, err
	case <-time.After(startBound):
		cancel()
		<-done
		return nil, fmt.Errorf("dev fleet: the router did not serve within %s", startBound)
	}
}

// Stop ends the fleet and returns Run's error: nil after a clean drain.
func (r *Running) Stop() error {
	r.cancel()
	return <-r.done
}
