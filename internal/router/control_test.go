package router

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Under prefill-heavy load the router's monitor loop moves a decode
// engine to prefill, shows it in /narwhal/state and journals the decision.
func TestRoleControlUnderPrefillHeavyLoad(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) {
		c.Controller.MonitorIntervalS = 0.1
		r := &c.Controller.Reactive
		r.StepS, r.WindowS, r.EvidenceSpanS, r.EvidenceMaxSpanS = 0.5, 5, 1, 2
		r.MinArrivals, r.EvidenceMinArrivals = 5, 5
		c.Controller.Thresholds.CooldownS = 0
		c.Serving.Admission = fleet.AdmissionOpen
	})
	prompt := strings.Repeat("word ", 1500)
	stop := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && !flippedToPrefill(t, h) {
				h.post(ctx(t), "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2})
			}
		}()
	}
	wg.Wait()
	if !flippedToPrefill(t, h) {
		t.Fatalf("no move toward prefill within 8 s of prefill-heavy load; state: %s", get(t, h.srv.URL+"/narwhal/state"))
	}
	j, err := journal.ReadFile(h.jpath)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range j.Events {
		found = found || (e.Event.Name == journal.EventControllerDecision && e.Event.Fields["result"] == "applied")
	}
	if !found {
		t.Error("no applied controller_decision event in the journal")
	}
}

func flippedToPrefill(t *testing.T, h *harness) bool {
	var st struct {
		Flips []struct {
			To string `json:"to"`
		} `json:"flips"`
	}
	if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &st); err != nil {
		t.Fatal(err)
	}
	for _, f := range st.Flips {
		if f.To == "prefill" {
			return true
		}
	}
	return false
}

func get(t *testing.T, url string) string {
	_, b := testkit.Get(t, url)
	return string(b)
}
