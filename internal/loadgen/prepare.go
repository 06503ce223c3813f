package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/progress"
)

// prepare asks the router for its model (unless given) and SLO, so a
// results file can be scored on its own.
func (g *Generator) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if g.cfg.Model == "" {
		var models struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := g.getJSON(ctx, "/v1/models", &models); err != nil {
			return err
		}
		if len(models.Data) != 1 {
			return fmt.Errorf("%s/v1/models lists %d models; name one with --model", g.cfg.Router, len(models.Data))
		}
		g.cfg.Model = models.Data[0].ID
	}
	var state struct {
		SLO *SLO `json:"slo"`
	}
	if g.getJSON(ctx, "/narwhal/state", &state) == nil && state.SLO != nil && state.SLO.TTFT > 0 {
		g.slo = state.SLO
	}
	return nil
}

func (g *Generator) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.Router+path, nil)
	if err != nil {
		return fmt.Errorf("--router: %w", err)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("reach the router at %s: %w; is it running (make run)?", g.cfg.Router, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: HTTP %d", g.cfg.Router, path, resp.StatusCode)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s%s: %w", g.cfg.Router, path, err)
	}
	return nil
}

// progress shows the run on Progress (internal/progress: a redrawn bar
// on a terminal every 200 ms, a line every 5 s elsewhere) until the
// returned stop is called.
func (g *Generator) progress() (stop func()) {
	w := g.cfg.Progress
	if w == nil {
		return func() {}
	}
	bar := progress.New(w, "narwhal bench", false)
	every := 5 * time.Second
	if progress.IsTerminal(w) {
		every = 200 * time.Millisecond
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				bar.Finish(g.status())
				return
			case <-t.C:
				bar.Set(g.share(), g.status())
			}
		}
	}()
	return func() { close(quit); <-done }
}

// share is the share of offers finished.
func (g *Generator) share() float64 {
	return float64(g.finished.Load()) / float64(max(1, len(g.cfg.Schedule.Offers)))
}

// status is the run's counts now.
func (g *Generator) status() string {
	return fmt.Sprintf("%d/%d done, %d in flight, %d not completed, %.0f s", g.finished.Load(), len(g.cfg.Schedule.Offers),
		g.inflight.Load(), g.failed.Load(), time.Since(g.start).Seconds())
}
