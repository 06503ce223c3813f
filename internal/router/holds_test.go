package router

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Engines that must be held out: another build, an incompatible KV
// layout, a wrong engine credential, and the readmission gates that must
// stop before KV moves.

// logBuffer is a slog destination tests can read while the router writes.
type logBuffer struct{ testkit.SyncBuffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// readyDoc is GET /ready.
type readyDoc struct {
	code   int
	retry  string
	Status string `json:"status"`
	Reason string `json:"reason"`
	Held   []struct {
		IID, Cause, Detail string
	} `json:"held"`
}

func (h *harness) ready(t *testing.T) readyDoc {
	t.Helper()
	resp, err := http.Get(h.srv.URL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d readyDoc
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("/ready body %q: %v", b, err)
	}
	d.code, d.retry = resp.StatusCode, resp.Header.Get("Retry-After")
	return d
}

// heldCause is the cause /ready lists for iid, or "".
func (d readyDoc) heldCause(iid string) string {
	for _, x := range d.Held {
		if x.IID == iid {
			return x.Cause
		}
	}
	return ""
}

// gauge reads one series (a gauge or a counter) of the router's registry.
func (h *harness) gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := h.router.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// settleRestart waits until the router noticed that engine iid restarted
// (an engine_ejected process_identity row) and finished handling it (the
// ejection ended: readmitted or held out for another reason).
func (h *harness) settleRestart(t *testing.T, iid string) {
	t.Helper()
	eventually(t, iid+"'s restart handled", func() bool {
		j, err := journal.ReadFile(h.jpath)
		if err != nil {
			return false
		}
		for _, e := range j.Events {
			if e.Event.Name == journal.EventEngineEjected && e.Event.Fields["iid"] == iid {
				return !h.ejected(iid)
			}
		}
		return false
	})
	h.probesRun(t, iid, 2) // a few more probes of the new process
}

func otherBuild(version string) simengine.CompatFactors {
	id := simengine.DefaultCompat(model)
	id.VLLMVersion = version
	return id
}

// Issue 11 item 1: an engine restarted as another build is readmitted on
// an uncontracted fleet and every crossed request then fails at the NIXL
// handshake. It must be held out as incompatible-build; its peer serves.
func TestDifferentBuildIsHeldOut(t *testing.T) {
	logs := &logBuffer{}
	h := startHarness(t, pd, harnessOptions{mod: fastRecovery, logger: logs.logger()})
	h.engines.Engines[1].RestartAs(otherBuild("0.22.0"))
	h.settleRestart(t, "d0")
	for i := 0; i < 4; i++ {
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("q", i), "max_tokens": 3})
		if resp.StatusCode != 200 {
			t.Fatalf("request %d after d0 came back as vLLM 0.22.0: %d %s (d0 should be held out, p0 serves alone)", i, resp.StatusCode, out)
		}
	}
	d := h.ready(t)
	if d.code != 200 || d.heldCause("d0") != "incompatible-build" {
		t.Errorf("/ready %d %+v: want 200 with d0 held as incompatible-build", d.code, d)
	}
	if v := h.gauge(t, "narwhal_engine_held", map[string]string{"iid": "d0", "cause": "incompatible-build"}); v != 1 {
		t.Errorf("narwhal_engine_held{d0,incompatible-build} = %v, want 1", v)
	}
	if n := logs.Count("engine held out", "iid=d0", "incompatible-build"); n != 1 {
		t.Errorf("%d log lines say d0 is held out, want exactly 1:\n%s", n, logs.String())
	}
	// The operator restarts it with the fleet's build: it returns.
	h.engines.Engines[1].RestartAs(otherBuild("0.21.0"))
	eventually(t, "d0 back with the fleet's build", func() bool { return h.router.av.Usable("d0") })
	if v := h.gauge(t, "narwhal_engine_held", map[string]string{"iid": "d0", "cause": "incompatible-build"}); v != 0 {
		t.Errorf("narwhal_engine_held{d0,incompatible-build} = %v after the fix, want 0", v)
	}
	j, err := journal.ReadFile(h.jpath)
	if err != nil {
		t.Fatal(err)
	}
	var holds []string
	for _, e := range j.Events {
		if n := e.Event.Name; n == journal.EventEngineHoldStarted || n == journal.EventEngineHoldEnded {
			holds = append(holds, fmt.Sprint(n, " ", e.Event.Fields["iid"], " ", e.Event.Fields["kind"]))
		}
	}
	if want := "[engine_hold_started d0 incompatible-build engine_hold_ended d0 incompatible-build]"; fmt.Sprint(holds) != want {
		t.Errorf("journal hold events %v, want %s", holds, want)
	}
}

// The held engine is the last that can take its role (p0 is pinned to
// prefill): the fleet says so on /ready and refuses with a clear 503
// instead of failing every request at the handshake.
func TestDifferentBuildOnTheLastOfItsRoleIsRefusedClearly(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) {
		fastRecovery(c)
		c.Engines[0].Pin = true
	})
	h.engines.Engines[1].RestartAs(otherBuild("0.22.0"))
	h.settleRestart(t, "d0")
	d := h.ready(t)
	if d.code != 503 || d.retry == "" || !strings.Contains(d.Reason, "d0") || !strings.Contains(d.Reason, "incompatible-build") {
		t.Fatalf("/ready %d Retry-After %q reason %q: want 503 naming d0 incompatible-build", d.code, d.retry, d.Reason)
	}
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "q", "max_tokens": 3})
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	_ = json.Unmarshal(out, &body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || body.Error.Code != "backend_unavailable" ||
		!strings.Contains(body.Error.Message, "incompatible-build") {
		t.Errorf("completion: %d Retry-After %q %s; want 503 backend_unavailable naming the hold", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
}

// A consumer that refuses a producer's KV at the NIXL handshake (same
// /version, another dtype) is held out after the first refusal. Its peer
// serves alone; pinned to prefill it cannot, and the fleet says so.
func TestKVRefusalOnALiveLegHoldsTheEngine(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(fmt.Sprint("prefill pinned ", pinned), func(t *testing.T) {
			h := newHarness(t, pd, func(c *fleet.Config) { fastRecovery(c); c.Engines[0].Pin = pinned })
			odd := simengine.DefaultCompat(model)
			odd.DType = "torch.float16"
			h.engines.Engines[1].RestartAs(odd)
			h.settleRestart(t, "d0")
			var codes []int
			for i := 0; i < 6; i++ {
				resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("k", i), "max_tokens": 3})
				codes = append(codes, resp.StatusCode)
			}
			// The first request finds out (it fails, or a retry serves it);
			// the rest never reach d0: served by p0 alone, or, with p0
			// pinned, refused before any leg because /ready is 503.
			want := "[200 200 200 200 200]"
			if pinned {
				want = "[503 503 503 503 503]"
			}
			if fmt.Sprint(codes[1:]) != want {
				t.Fatalf("statuses %v after d0 came back with another dtype, want the first then %s", codes, want)
			}
			d := h.ready(t)
			if d.heldCause("d0") != "incompatible-kv" || (d.code == 503) != pinned || (pinned && !strings.Contains(d.Reason, "incompatible-kv")) {
				t.Errorf("/ready %d %+v, want d0 held as incompatible-kv, 503 naming it only when pinned", d.code, d)
			}
		})
	}
}

// drainRestart drains engine i (iid), waits until it is drained and
// restarts it.
func (h *harness) drainRestart(t *testing.T, i int, iid string) {
	t.Helper()
	if code, doc := h.lifecycle(t, "drain", iid); code != 200 {
		t.Fatalf("drain %s: %d %v", iid, code, engineState(doc, iid))
	}
	eventually(t, iid+" drained", func() bool {
		return h.router.life.Records()[indexOf(h.router.order, iid)].State == "drained"
	})
	h.engines.Engines[i].Restart()
}

func checkNames(e map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, c := range e["checks"].([]any) {
		m := c.(map[string]any)
		out[m["name"].(string)] = m["ok"].(bool)
	}
	return out
}

// Item 1, contracted: a failed attestation (the sidecar still bound to the
// old process) ends readmission before any KV moves.
func TestReadmissionStopsAtAFailedAttestation(t *testing.T) {
	h := startHarness(t, ppdd, harnessOptions{sidecars: true, mod: func(c *fleet.Config) { fastRecovery(c); completeContract(c) }})
	h.drainRestart(t, 3, "d1") // the sidecar is not restarted: it answers 503
	code, doc := h.lifecycle(t, "readmit", "d1")
	e := engineState(doc, "d1")
	checks := checkNames(e)
	if code != 409 || e["state"] != "blocked" {
		t.Fatalf("readmit with a stale sidecar: %d %v", code, e)
	}
	if ok, ran := checks["attestation"]; !ran || ok {
		t.Errorf("checks %v: want attestation failed", checks)
	}
	for _, later := range []string{"generation", "kv_transfer", "final_health"} {
		if _, ran := checks[later]; ran {
			t.Errorf("the %s gate ran after attestation failed (checks %v)", later, checks)
		}
	}
	// With the sidecar restarted beside the new process, readmission passes.
	h.restartSidecar(3)
	if code, doc := h.lifecycle(t, "readmit", "d1"); code != 200 {
		t.Fatalf("readmit with a fresh sidecar: %d %v", code, engineState(doc, "d1"))
	}
}

// A contracted engine without attestation_url cannot prove its build: the
// attestation gate fails instead of passing.
func TestAttestationGateFailsWithoutAttestationURL(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) { fastRecovery(c); completeContract(c) })
	h.drainRestart(t, 3, "d1")
	code, doc := h.lifecycle(t, "readmit", "d1")
	e := engineState(doc, "d1")
	checks := checkNames(e)
	if code != 409 || e["accepts_new"] != false {
		t.Fatalf("readmit without attestation_url: %d %v", code, e)
	}
	if ok, ran := checks["attestation"]; !ran || ok || !strings.Contains(fmt.Sprint(e["error"]), "attestation_url") {
		t.Errorf("checks %v error %q: want a failed attestation naming attestation_url", checks, e["error"])
	}
	if _, ran := checks["kv_transfer"]; ran {
		t.Errorf("kv_transfer ran without an attestation (checks %v)", checks)
	}
}

// Issue 11 item 5: the router's engine key is wrong. /ready must not be
// 200 while every request fails: the engines are held out as engine-auth,
// logged once each, exported, and requests get a clear 503 until a probe
// with the credential succeeds again.
func TestWrongEngineKeyIsHeldOut(t *testing.T) {
	logs := &logBuffer{}
	h := startHarness(t, pd, harnessOptions{
		mod:    func(c *fleet.Config) { fastRecovery(c); c.Engine.EngineAPIKeyEnv = "NARWHAL_TEST_ENGINE_KEY" },
		engine: func(c *simengine.Config) { c.APIKey = "k3y-r1ght-7f" },
		lookup: func(string) (string, bool) { return "k3y-wr0ng-7f", true },
		logger: logs.logger(),
	})
	d := h.ready(t)
	if d.code != 503 || !strings.Contains(d.Reason, "engine-auth") || d.heldCause("p0") != "engine-auth" || d.heldCause("d0") != "engine-auth" {
		t.Fatalf("/ready %d %+v: want 503 with both engines held as engine-auth", d.code, d)
	}
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "q", "max_tokens": 3})
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(out), `"code":"backend_unavailable"`) {
		t.Errorf("completion: %d Retry-After %q %s; want 503 backend_unavailable", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	var st struct {
		Held []struct{ IID, Cause string }
	}
	if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &st); err != nil || len(st.Held) != 2 {
		t.Errorf("/narwhal/state held %+v (%v), want both engines", st.Held, err)
	}
	for _, iid := range []string{"p0", "d0"} {
		h.probesRun(t, iid, 3) // hold probes
	}
	for _, iid := range []string{"p0", "d0"} {
		if v := h.gauge(t, "narwhal_engine_held", map[string]string{"iid": iid, "cause": "engine-auth"}); v != 1 {
			t.Errorf("narwhal_engine_held{%s,engine-auth} = %v, want 1", iid, v)
		}
		if n := logs.Count("engine held out", "iid="+iid, "engine-auth"); n != 1 {
			t.Errorf("%d log lines say %s is held out for its credential, want exactly 1:\n%s", n, iid, logs.String())
		}
		if logs.Count("k3y-wr0ng-7f") > 0 || logs.Count("k3y-r1ght-7f") > 0 {
			t.Errorf("a credential value reached the log:\n%s", logs.String())
		}
	}
	// The operator fixes the engines' key: the next probe releases them.
	for _, e := range h.engines.Engines {
		e.SetAPIKey("k3y-wr0ng-7f")
	}
	eventually(t, "the engines released", func() bool { return h.ready(t).code == 200 })
	if resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "q", "max_tokens": 3}); resp.StatusCode != 200 {
		t.Errorf("after the key fix: %d %s", resp.StatusCode, out)
	}
	if n := logs.Count("engine released", "iid=p0", "engine-auth"); n != 1 {
		t.Errorf("%d release log lines for p0, want 1", n)
	}
}

// With its only decode engine ejected, the fleet answers 503
// backend_unavailable with a Retry-After the lifecycle computes: the
// ejected engine's next readmission probe (recovery.readmit_every passes
// of controller.monitor_interval_s) plus the pass that readmits it, not
// a constant second.
func TestNoEngineRetryAfterIsTheNextReadmissionChance(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) {
		fastRecovery(c)
		c.Recovery.ReadmitEvery = 50 // 50 passes of 0.05 s: the next probe 2.5 s out
		c.Engines[0].Pin = true      // p0 may not take the decode leg instead
	})
	h.engines.Engines[1].SetFaults(simengine.Faults{RefuseConnections: true}) // d0 is dead
	eventually(t, "d0 ejected", func() bool { _, ok := h.router.life.Ejected()["d0"]; return ok })
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "q", "max_tokens": 3})
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 503 || !strings.Contains(string(out), `"code":"backend_unavailable"`) || ra < 2 || ra > 3 {
		t.Errorf("completion: %d Retry-After %q %s; want 503 backend_unavailable, Retry-After 2–3 s (next probe ≤ 2.5 s + one pass)",
			resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	h.engines.Engines[1].SetFaults(simengine.Faults{})
}
