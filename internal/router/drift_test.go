package router

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// fastDrift scores 1 s windows (fastRecovery) and shortens the streaks.
func fastDrift(probation, evict, recovery int) func(*fleet.Config) {
	return func(c *fleet.Config) {
		fastRecovery(c)
		c.Recovery.LivenessEvery = 0
		c.Recovery.ReadmitEvery = 1000 // an evicted engine stays out while the test looks
		c.Recovery.Health.ProbationWindows = probation
		c.Recovery.Health.EvictWindows = evict
		c.Recovery.Health.RecoveryWindows = recovery
	}
}

// load keeps n streaming clients busy until the returned stop is called;
// stop waits for them and reports how many requests did not complete.
func (h *harness) load(n int) (stop func() int) {
	var quit atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !quit.Load(); i++ {
				body := fmt.Sprintf(`{"prompt":"load %d %d","max_tokens":24,"stream":true}`, k, i)
				resp, err := http.Post(h.srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					failed.Add(1)
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				h.noteRID(resp)
				if resp.StatusCode != 200 || !strings.Contains(string(out), "[DONE]") {
					failed.Add(1)
				}
			}
		}()
	}
	return func() int {
		quit.Store(true)
		wg.Wait()
		return int(failed.Load())
	}
}

// probation is /narwhal/state.probation.
func (h *harness) probation(t *testing.T) []string {
	var st struct{ Probation []string }
	if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Probation
}

// A decode engine made 6× slower than its profile drifts: probation after
// probation_windows over-band windows, then ejection with cause drift
// after evict_windows, while its healthy peers stay in service.
func TestSlowDecodeEngineGoesToProbationThenEviction(t *testing.T) {
	h := newHarness(t, pddd, fastDrift(2, 4, 2))
	h.engines.Engines[1].SetFaults(simengine.Faults{LatencyMultiplier: 6}) // d0
	stop := h.load(6)
	peersClean := true
	eventually(t, "d0 on probation", func() bool {
		p := h.probation(t)
		peersClean = peersClean && !slices.Contains(p, "d1") && !slices.Contains(p, "d2")
		return slices.Contains(p, "d0")
	})
	for _, iid := range []string{"d0", "d1", "d2"} {
		st := h.router.av.DriftStates()[iid]
		t.Logf("at probation: %s last window score %.2f (baseline %.2f), %d windows scored", iid, st.LastScore, st.Baseline, st.Scored)
	}
	h.router.mu.Lock()
	penalised := h.router.core.Instance("d0").Probation
	h.router.mu.Unlock()
	if !penalised {
		t.Error("d0 is on probation but placement does not price its penalty")
	}
	eventually(t, "d0 evicted for drift", func() bool {
		p := h.probation(t)
		peersClean = peersClean && !slices.Contains(p, "d1") && !slices.Contains(p, "d2")
		return h.router.life.Ejected()["d0"] == "drift"
	})
	if failed := stop(); failed != 0 {
		t.Errorf("%d requests failed while d0 drifted; a slow engine is not a failing one", failed)
	}
	if !peersClean || h.ejected("d1") || h.ejected("d2") {
		t.Errorf("a healthy peer was penalised: probation %v, ejected %v", h.probation(t), h.router.life.Ejected())
	}
	if p := h.probation(t); slices.Contains(p, "d0") {
		t.Errorf("probation %v still lists the evicted d0", p)
	}
}

// Probation ends after recovery_windows healthy windows once the engine
// keeps pace again.
func TestDriftProbationClearsWhenTheEngineRecovers(t *testing.T) {
	h := newHarness(t, pddd, fastDrift(2, 1000, 2))
	h.engines.Engines[1].SetFaults(simengine.Faults{LatencyMultiplier: 6})
	stop := h.load(6)
	defer stop()
	eventually(t, "d0 on probation", func() bool { return slices.Contains(h.probation(t), "d0") })
	h.engines.Engines[1].SetFaults(simengine.Faults{})
	eventually(t, "d0 off probation", func() bool { return !slices.Contains(h.probation(t), "d0") })
	if h.ejected("d0") {
		t.Error("d0 was ejected though evict_windows is out of reach")
	}
}
