package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
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

// progress redraws a one-line bar on a terminal every 200 ms (a line
// every 5 s elsewhere) until the returned stop is called.
func (g *Generator) progress() (stop func()) {
	w := g.cfg.Progress
	if w == nil {
		return func() {}
	}
	every, cr := 5*time.Second, "\n"
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			every, cr = 200*time.Millisecond, "\r"
		}
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				fmt.Fprint(w, g.bar()+"\n")
				return
			case <-t.C:
				fmt.Fprint(w, g.bar()+cr)
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (g *Generator) bar() string {
	total := len(g.cfg.Schedule.Offers)
	done := int(g.finished.Load())
	const width = 30
	fill := width * done / max(1, total)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	return fmt.Sprintf("[%s] %d/%d done, %d in flight, %d not completed, %.0f s", bar, done, total,
		g.inflight.Load(), g.failed.Load(), time.Since(g.start).Seconds())
}
