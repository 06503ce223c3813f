package lifecycle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

func heldCauses(m *Manager) string {
	var out []string
	for _, h := range m.Holds() {
		out = append(out, h.IID+":"+h.Cause)
	}
	return strings.Join(out, ",")
}

func TestBuildRule(t *testing.T) {
	type obs struct{ iid, version string }
	cases := []struct {
		name     string
		contract bool
		seen     []obs
		build    string
		held     string
	}{
		{"agreeing fleet", false, []obs{{"d0", "1"}, {"d1", "1"}, {"p0", "1"}}, "1", ""},
		{"one restarted as another build", false, []obs{{"d0", "1"}, {"d1", "1"}, {"p0", "1"}, {"d1", "2"}}, "1", "d1:incompatible-build"},
		{"a tie keeps the starting build", false, []obs{{"d0", "1"}, {"p0", "1"}, {"d0", "2"}}, "1", "d0:incompatible-build"},
		{"a tie at the start goes to the first observation", false, []obs{{"d0", "1"}, {"d1", "2"}}, "1", "d1:incompatible-build"},
		{"the majority moves the build", false, []obs{{"d0", "1"}, {"d1", "1"}, {"p0", "1"}, {"d0", "2"}, {"d1", "2"}}, "2", "p0:incompatible-build"},
		{"fixed again", false, []obs{{"d0", "1"}, {"p0", "1"}, {"d0", "2"}, {"d0", "1"}}, "1", ""},
		{"the contract decides", true, []obs{{"d0", "0.12.0"}, {"d1", "0.12.0"}, {"p0", "0.11.0"}}, "0.11.0", "d0:incompatible-build,d1:incompatible-build"},
	}
	for _, c := range cases {
		m := New(testFleet(c.contract))
		for i, o := range c.seen {
			m.ObserveVersion(o.iid, o.version, float64(i))
		}
		if m.Build() != c.build || heldCauses(m) != c.held {
			t.Errorf("%s: build %q held %q, want %q and %q", c.name, m.Build(), heldCauses(m), c.build, c.held)
		}
		for _, iid := range []string{"p0", "d0", "d1"} {
			if want := !strings.Contains(c.held, iid+":"); m.Live(iid) != want {
				t.Errorf("%s: Live(%s) = %v, want %v", c.name, iid, m.Live(iid), want)
			}
		}
	}
}

func TestKVRefusalHoldsTheOddEngine(t *testing.T) {
	type refusal struct{ consumer, producer, local, remote string }
	cases := []struct {
		name     string
		starts   map[string]float64
		refusals []refusal
		held     string
	}{
		{"the consumer restarted last", map[string]float64{"p0": 10, "d0": 20}, []refusal{{"d0", "p0", "B", "A"}}, "d0:incompatible-kv"},
		{"the producer restarted last", map[string]float64{"p0": 30, "d0": 20}, []refusal{{"d0", "p0", "B", "A"}}, "p0:incompatible-kv"},
		{"no identities: the consumer", nil, []refusal{{"d0", "p0", "", ""}}, "d0:incompatible-kv"},
		{"the majority confirms the process age", map[string]float64{"p0": 30, "d0": 20, "d1": 5},
			[]refusal{{"d0", "p0", "B", "A"}, {"d1", "p0", "B", "A"}}, "p0:incompatible-kv"},
		{"the majority corrects a wrong first guess", map[string]float64{"p0": 10, "d0": 20, "d1": 50},
			[]refusal{{"d0", "p0", "B", "A"}, {"d1", "p0", "B", "A"}}, "p0:incompatible-kv"},
	}
	for _, c := range cases {
		m := New(testFleet(false))
		for iid, s := range c.starts {
			m.AcceptIdentity(iid, vllm.Identity{Version: "1", ProcessStart: s})
		}
		for i, r := range c.refusals {
			m.KVRefused(r.consumer, r.producer, r.local, r.remote, float64(i))
		}
		if got := heldCauses(m); got != c.held {
			t.Errorf("%s: held %q, want %q", c.name, got, c.held)
		}
	}
}

func TestHoldsAndTheirRelease(t *testing.T) {
	m := New(testFleet(true))
	m.AcceptIdentity("d0", vllm.Identity{Version: "0.11.0", ProcessStart: 100})
	if !m.Hold("d0", HoldEngineAuth, "401", 1) || m.Hold("d0", HoldEngineAuth, "401 again", 2) {
		t.Fatal("Hold must report only the transition")
	}
	if m.Live("d0") || fmt.Sprint(m.Held()) != "[d0]" {
		t.Fatalf("a held engine is live (%v)", m.Held())
	}
	if h := m.Holds(); len(h) != 1 || h[0].Detail != "401 again" || h[0].Since != 1 {
		t.Errorf("holds %+v: the repeat refreshes the detail, keeps the start", h)
	}
	if !m.Release("d0", HoldEngineAuth) || m.Release("d0", HoldEngineAuth) || !m.Live("d0") {
		t.Error("Release must report only the transition and return the engine")
	}
	m.KVRefused("d0", "p0", "B", "A", 3)
	if m.NewProcess("d0", 100) || !strings.Contains(heldCauses(m), "d0:incompatible-kv") {
		t.Error("the same process lifted its incompatible-kv hold")
	}
	if !m.NewProcess("d0", 200) || heldCauses(m) != "" {
		t.Errorf("a new process keeps its incompatible-kv hold: %q", heldCauses(m))
	}
}

func TestReadmissionClearsHolds(t *testing.T) {
	m := New(testFleet(true))
	m.AcceptIdentity("d0", vllm.Identity{Version: "0.11.0", ProcessStart: 100})
	if _, err := m.Drain("d0", 1, 30, false, func() (vllm.Identity, error) { return vllm.Identity{Version: "0.11.0", ProcessStart: 100}, nil }); err != nil {
		t.Fatal(err)
	}
	m.Settle(2, func(string) int { return 0 })
	m.Hold("d0", HoldEngineAuth, "401", 2)
	pass := func(string, *vllm.Identity, bool) ([]Check, vllm.Identity) {
		return []Check{{Name: "health", OK: true}}, vllm.Identity{Version: "0.11.0", ProcessStart: 200}
	}
	if _, err := m.Readmit("d0", 3, pass); err != nil || !m.Live("d0") || heldCauses(m) != "" {
		t.Errorf("readmit: %v, live %v, holds %q", err, m.Live("d0"), heldCauses(m))
	}
}
