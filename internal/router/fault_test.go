package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// fastRecovery makes the monitor loop, readmission and liveness quick.
func fastRecovery(c *fleet.Config) {
	c.Controller.MonitorIntervalS = 0.05
	c.Recovery.ReadmitEvery = 2
	c.Recovery.LivenessEvery = 2
	c.Recovery.Health.WindowS = 1
	c.Controller.Advisory = true // roles stay put: these tests are about availability
}

// completeContract declares the complete engine_contract the simulated
// engines attest (their sidecars verify against it).
func completeContract(c *fleet.Config) {
	k := simengine.Contract(simengine.DefaultCompat(model))
	c.EngineContract = &k
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, what, cond)
}

// probesRun waits until n more of iid's probe jobs (readmission, hold,
// liveness) have ended: what a check that something did not happen
// waits for, instead of a sleep.
func (h *harness) probesRun(t *testing.T, iid string, n int64) {
	t.Helper()
	from := h.router.av.ProbesDone(iid)
	eventually(t, fmt.Sprintf("%d probes of %s", n, iid), func() bool { return h.router.av.ProbesDone(iid) >= from+n })
}

func (h *harness) ejected(iid string) bool {
	_, ok := h.router.life.Ejected()[iid]
	return ok
}

func TestConnectionRefusedEjectsWithinTheStreak(t *testing.T) {
	h := newHarness(t, ppdd, fastRecovery)
	h.engines.Engines[0].SetFaults(simengine.Faults{RefuseConnections: true}) // p0 is dead
	died := time.Now()
	for i := 0; i < 6; i++ {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("q", i), "max_tokens": 2})
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s (retries should route around p0)", i, resp.StatusCode, out)
		}
	}
	if !h.ejected("p0") {
		t.Fatalf("p0 refused connections %d times and is not ejected; streaks %v", 6, h.router.life.Streaks()["p0"])
	}
	t.Logf("ejection: p0 out of placement within %v of refusing connections (6 requests, all served)", time.Since(died).Round(time.Millisecond))
	if got := h.router.life.Ejected()["p0"]; got != "connection" && got != "liveness" {
		t.Errorf("cause %q, want connection (request path) or liveness (sweep)", got)
	}
	// Healthy again: the readmission probe brings it back.
	h.engines.Engines[0].SetFaults(simengine.Faults{})
	healed := time.Now()
	eventually(t, "p0 readmitted", func() bool { return !h.ejected("p0") })
	t.Logf("readmission: p0 back %v after it healed (monitor 50 ms, readmit_every 2)", time.Since(healed).Round(time.Millisecond))
}

func TestBusyButHealthyEngineIsNotEjected(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) {
		fastRecovery(c)
		c.Serving.PrefillTimeoutS = 0.2
		c.Serving.MaxAttempts = 1
		c.Serving.Admission = fleet.AdmissionOpen
	})
	h.engines.Engines[0].SetFaults(simengine.Faults{LatencyMultiplier: 100}) // slow, not dead
	for i := 0; i < 4; i++ {
		resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "slow prefill " + strings.Repeat("x ", 200), "max_tokens": 2})
		if resp.StatusCode != 504 {
			t.Fatalf("request %d: %d, want 504 from the prefill timeout", i, resp.StatusCode)
		}
	}
	// The /health checks run in the background (the liveness sweep between
	// these requests, the breaker's verification at eject_after timeouts in
	// a row), and a failed one ejects: wait until a probe of p0 has ended
	// since the last 504 and a /health answer has cleared its timeouts, then
	// look.
	from := h.router.av.ProbesDone("p0")
	eventually(t, "a probe of p0 since the 504s and its timeout streak cleared", func() bool {
		return h.router.av.ProbesDone("p0") > from && h.router.life.Streaks()["p0"]["timeout"] == 0
	})
	if h.ejected("p0") {
		t.Fatal("a slow engine that answers /health was ejected")
	}
}

func TestEngineReturning500sIsEjectedAfterVerification(t *testing.T) {
	h := newHarness(t, ppdd, fastRecovery)
	h.engines.Engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1})
	for i := 0; i < 6; i++ {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("q", i), "max_tokens": 2})
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, out)
		}
	}
	eventually(t, "p0 ejected after its inference probe failed", func() bool { return h.ejected("p0") })
}

func TestEngineKilledMidStream(t *testing.T) {
	h := newHarness(t, ppdd, fastRecovery)
	h.engines.Engines[2].SetFaults(simengine.Faults{DropAfterTokens: 2}) // d0 dies mid-stream
	for i := 0; i < 4; i++ {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("q", i), "max_tokens": 8, "stream": true})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		events := testkit.SSEData(t, out)
		last := events[len(events)-1]
		if last != "[DONE]" && !strings.Contains(last, `"code":"failed"`) {
			t.Errorf("stream ended with %q: neither [DONE] nor the terminal error event", last)
		}
	}
	streak := h.router.life.Streaks()["d0"]["output_cut"]
	if streak == 0 && !h.ejected("d0") {
		t.Error("the broken streams were not counted against d0")
	}
}

func TestRestartedEngineLeavesServiceAndReturns(t *testing.T) {
	h := newHarness(t, ppdd, fastRecovery)
	before := h.router.life.ProcessStarts()["d1"]
	h.engines.Engines[3].Restart()
	restarted := time.Now()
	eventually(t, "d1 excluded as a new process", func() bool { return h.router.life.Ejected()["d1"] == "process_identity" })
	excluded := time.Since(restarted)
	eventually(t, "d1 back in service", func() bool { return !h.ejected("d1") })
	t.Logf("restart: d1 excluded %v after its restart, revalidated and back after %v (liveness_every 2, readmit_every 2, monitor 50 ms)",
		excluded.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	if after := h.router.life.ProcessStarts()["d1"]; after <= before {
		t.Errorf("accepted process start %v, want newer than %v", after, before)
	}
}

func (h *harness) lifecycle(t *testing.T, action, iid string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"iid": iid, "deadline_s": 30})
	resp, err := http.Post(h.srv.URL+"/narwhal/lifecycle/"+action, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

func engineState(doc map[string]any, iid string) map[string]any {
	return doc["engines"].(map[string]any)[iid].(map[string]any)
}

func TestDrainWithoutContractIsMissingContract(t *testing.T) {
	h := newHarness(t, ppdd, fastRecovery)
	code, doc := h.lifecycle(t, "drain", "d1")
	e := engineState(doc, "d1")
	if code != 503 || e["state"] != "blocked" || e["accepts_new"] != false {
		t.Fatalf("drain without a contract: %d %v", code, e)
	}
	checks := e["checks"].([]any)
	if len(checks) != 1 || checks[0].(map[string]any)["name"] != "missing-contract" {
		t.Errorf("checks = %v", checks)
	}
	code, doc = h.lifecycle(t, "readmit", "d1")
	if code != 409 || engineState(doc, "d1")["accepts_new"] != false {
		t.Errorf("readmit without a contract: %d %v", code, engineState(doc, "d1"))
	}
}

func TestDrainDuringLoadThenReadmit(t *testing.T) {
	h := startHarness(t, ppdd, harnessOptions{sidecars: true, mod: func(c *fleet.Config) { fastRecovery(c); completeContract(c) }})
	// A long stream resident on a decode engine while it drains.
	done := make(chan []byte)
	go func() {
		_, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "long", "max_tokens": 60, "stream": true})
		done <- out
	}()
	var target string
	eventually(t, "a resident decode stream", func() bool {
		for _, e := range h.router.state().Engines {
			if e.ResidentDecode > 0 {
				target = e.IID
				return true
			}
		}
		return false
	})
	code, doc := h.lifecycle(t, "drain", target)
	if code != 200 || engineState(doc, target)["state"] != "draining" {
		t.Fatalf("drain: %d %v", code, engineState(doc, target))
	}
	for i := 0; i < 4; i++ { // new work avoids the draining engine
		resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("n", i), "max_tokens": 2})
		row := h.row(resp.Header.Get("X-Request-Id"))
		if resp.StatusCode != 200 || *row.DecodeIID == target {
			t.Fatalf("request during the drain: %d on %v", resp.StatusCode, *row.DecodeIID)
		}
	}
	if out := <-done; !strings.Contains(string(out), "[DONE]") {
		t.Errorf("the resident stream did not finish: %s", out)
	}
	eventually(t, "drained", func() bool {
		return h.router.life.Records()[indexOf(h.router.order, target)].State == "drained"
	})
	// Readmitting the same process is refused: a drain means a restart.
	if code, doc := h.lifecycle(t, "readmit", target); code != 409 || engineState(doc, target)["state"] != "blocked" {
		t.Fatalf("readmit without a restart: %d %v", code, engineState(doc, target))
	}
	i := indexOf([]string{"p0", "p1", "d0", "d1"}, target)
	h.engines.Engines[i].Restart()
	h.restartSidecar(i) // the operator restarts the sidecar with its engine
	code, doc = h.lifecycle(t, "readmit", target)
	if code != 200 || engineState(doc, target)["state"] != "active" || engineState(doc, target)["accepts_new"] != true {
		t.Fatalf("readmit after a restart: %d %v", code, engineState(doc, target))
	}
	j, _ := journal.ReadFile(h.jpath)
	actions := map[string]bool{}
	for _, e := range j.Events {
		if e.Event.Name == journal.EventEngineLifecycle {
			actions[e.Event.Fields["action"].(string)] = true
		}
	}
	for _, a := range []string{"drain_started", "process_recorded", "drain_complete", "validation_failed", "readmitted"} {
		if !actions[a] {
			t.Errorf("journal lacks engine_lifecycle %s (has %v)", a, actions)
		}
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestLifecycleActionsNeedTheAdminToken(t *testing.T) {
	h := newHarness(t, pd, fastRecovery)
	h.router.adminToken = "s3cret"
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer s3cret", 409}} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/narwhal/lifecycle/readmit", strings.NewReader(`{"iid":"d0"}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.code)
		}
	}
	h.router.adminToken, h.router.adminOpen = "", false
	if code, _ := h.lifecycle(t, "drain", "d0"); code != 403 {
		t.Errorf("no token and not loopback-only: %d, want 403", code)
	}
}

func TestFailedLegQuarantinesTheEngine(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) {
		fastRecovery(c)
		c.Recovery.FailureQuarantineS = 0.3
	})
	h.engines.Engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1})
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "q", "max_tokens": 2})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if q := h.router.life.Quarantined(); len(q) != 1 || q[0] != "p0" {
		t.Fatalf("quarantined %v, want p0 after its failed leg", q)
	}
	h.engines.Engines[0].SetFaults(simengine.Faults{})
	eventually(t, "the quarantine to end", func() bool { return len(h.router.life.Quarantined()) == 0 && h.router.av.Usable("p0") })
}

func TestWholeWaveHoldAndWaveReadmission(t *testing.T) {
	h := startHarness(t, ppdd, harnessOptions{sidecars: true, mod: func(c *fleet.Config) {
		fastRecovery(c)
		completeContract(c)
		c.Recovery.EngineRestartPolicy = fleet.RestartWholeWave
	}})
	h.engines.Engines[3].SetFaults(simengine.Faults{RefuseConnections: true}) // d1 dies
	eventually(t, "the whole-wave hold", func() bool { return h.router.av.WaveBlocked() != "" })
	resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	if resp.StatusCode != 503 {
		t.Errorf("completion under the hold: %d, want 503", resp.StatusCode)
	}
	var health struct{ Status string }
	json.Unmarshal([]byte(get(t, h.srv.URL+"/health")), &health)
	if health.Status != "maintenance" {
		t.Errorf("/health status %q, want maintenance", health.Status)
	}
	// Readmitting while d1 is still down fails and keeps the hold.
	b, _ := http.Post(h.srv.URL+"/narwhal/lifecycle/readmit", "application/json", strings.NewReader(`{"wave":true}`))
	b.Body.Close()
	if b.StatusCode != 409 || h.router.av.WaveBlocked() == "" {
		t.Fatalf("wave readmit with a dead engine: %d, hold %q", b.StatusCode, h.router.av.WaveBlocked())
	}
	h.engines.Engines[3].SetFaults(simengine.Faults{}) // the operator restarted the wave
	b, _ = http.Post(h.srv.URL+"/narwhal/lifecycle/readmit", "application/json", strings.NewReader(`{"wave":true}`))
	b.Body.Close()
	if b.StatusCode != 200 || h.router.av.WaveBlocked() != "" {
		t.Fatalf("wave readmit: %d, hold %q", b.StatusCode, h.router.av.WaveBlocked())
	}
	if resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2}); resp.StatusCode != 200 {
		t.Errorf("after the wave readmission: %d %s", resp.StatusCode, out)
	}
}

// An engine that answers 500 to every request: each call gets one answer,
// served elsewhere, and pays at most two prefills (the router's own
// re-placement), with one journal row per call.
func TestAlways500EngineCostsAtMostTwoPrefills(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine int // index in ppdd: p0 p1 d0 d1
		phase  string
	}{
		{"prefill engine", 0, "prefill"},
		{"decode engine", 2, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, ppdd, nil)
			h.engines.Engines[tc.engine].SetFaults(simengine.Faults{HTTP500Rate: 1})
			for k := 0; k < 10; k++ {
				resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprintf("call %d", k), "max_tokens": 2})
				if resp.StatusCode != 200 {
					t.Fatalf("call %d: %d %s, want it served by a healthy engine", k, resp.StatusCode, out)
				}
				row := h.row(resp.Header.Get("X-Request-Id"))
				prefills := 1 // the one that served
				for _, f := range row.AttemptFailures {
					if f.RetryReason != journal.RetryReplaced || string(f.Phase) != tc.phase {
						t.Errorf("call %d: failure %+v, want one %s leg replaced", k, f, tc.phase)
					}
					if f.Phase == "decode" {
						prefills++ // a decode re-placement prefills again
					}
				}
				if len(row.AttemptFailures) > 1 || prefills > 2 {
					t.Errorf("call %d: %d failures, %d prefills; want at most one re-placement", k, len(row.AttemptFailures), prefills)
				}
			}
		})
	}
}
