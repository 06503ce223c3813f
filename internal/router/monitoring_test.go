package router

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// A monitor stage that keeps failing (here: the handoff document cannot be
// written) degrades the router after monitor_failure_limit passes; it
// admits again after the first clean pass.
func TestMonitoringDegradesAndRecovers(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, pd, func(c *fleet.Config) {
		c.Controller.MonitorIntervalS = 0.05
		c.Controller.MonitorFailureLimit = 3
		c.Recovery.Health.WindowS = 1
	}, func(o *Options) { o.HA.StatePath = filepath.Join(blocker, "state.json") }) // its parent is a file
	eventually(t, "degraded", func() bool { return strings.HasPrefix(h.router.av.DegradedReason(), "monitoring degraded: handoff") })
	resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	if resp.StatusCode != 503 {
		t.Errorf("completion while degraded: %d, want 503", resp.StatusCode)
	}
	if r, err := http.Get(h.srv.URL + "/ready"); err != nil || r.StatusCode != 503 {
		t.Errorf("/ready while degraded: %v %v", r, err)
	} else {
		r.Body.Close()
	}
	os.Remove(blocker)
	eventually(t, "recovered", func() bool { return h.router.av.DegradedReason() == "" })
	if resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1}); resp.StatusCode != 200 {
		t.Errorf("after recovery: %d %s", resp.StatusCode, out)
	}
}
