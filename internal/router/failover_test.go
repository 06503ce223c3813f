package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// defaultServing puts the serving section back to the fleet defaults
// (the harness enables retries): max_attempts 1, no handoff bound.
func defaultServing(c *fleet.Config) { c.Serving = fleet.Defaults().Serving }

// A dead engine (connection refused) with healthy peers costs the client
// nothing under the default serving section: the leg never reached the
// engine, so it moves to a peer within the same attempt.
func TestDeadEngineFailsOverWithDefaultServing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roles []fleet.Role
		dead  int    // index into the engines
		iid   string // its iid
		phase fault.Phase
	}{
		{"decode", []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode}, 1, "d0", fault.Decode},
		{"prefill", []fleet.Role{fleet.Prefill, fleet.Prefill, fleet.Decode}, 0, "p0", fault.Prefill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.roles, func(c *fleet.Config) {
				fastRecovery(c)
				defaultServing(c)
				c.Recovery.LivenessEvery = 0 // only the request path may notice the dead engine
			})
			if h.cfg.Serving.MaxAttempts != 1 {
				t.Fatalf("max_attempts %d: the test is about the default", h.cfg.Serving.MaxAttempts)
			}
			h.engines.Engines[tc.dead].SetFaults(simengine.Faults{RefuseConnections: true})
			for i := 0; i < 4; i++ {
				stream := i%2 == 1
				resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("dead ", i), "max_tokens": 4, "stream": stream})
				if resp.StatusCode != 200 || (stream && !strings.HasSuffix(strings.TrimSpace(string(out)), "[DONE]")) {
					t.Fatalf("request %d: %d %s (a healthy peer can take the leg)", i, resp.StatusCode, out)
				}
				row := h.row(resp.Header.Get("X-Request-Id"))
				if row.Attempts != 1 {
					t.Errorf("request %d: %d attempts, want 1 (a failover is not a retry)", i, row.Attempts)
				}
				if i > 0 {
					continue
				}
				// A refused connection is a failover (the engine never had
				// the leg); a kept connection the dead engine closed after
				// the request was written whole is not sent again by the
				// transport (the engine may have started it), and the
				// router re-places the leg instead: either way one move,
				// within the one attempt.
				if len(row.AttemptFailures) != 1 || (row.AttemptFailures[0].RetryReason != journal.RetryFailover &&
					row.AttemptFailures[0].RetryReason != journal.RetryReplaced) || row.AttemptFailures[0].Phase != tc.phase {
					t.Errorf("first request's attempt_failures %+v, want one %s failover or re-placement", row.AttemptFailures, tc.phase)
				}
			}
			if !h.ejected(tc.iid) {
				t.Errorf("%s refused every leg and is not ejected", tc.iid)
			}
		})
	}
}
