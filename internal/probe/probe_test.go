package probe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit/simkit"
)

// simFleet is n simengines serving model "m", each with a sidecar.
type simFleet struct {
	t        *testing.T
	engines  []*simengine.Engine
	sidecars []*attest.Server
}

func startFleet(t *testing.T, n int, tweak func(i int, c *simengine.Config)) *simFleet {
	t.Helper()
	f := &simFleet{t: t}
	f.engines, f.sidecars = simkit.Fleet(t, n, tweak)
	return f
}

// fleetOf is a fleet document for urls (attestation URLs beside them,
// "" for none) with the given engine and serving sections' fields.
func fleetOf(t *testing.T, urls, attestURLs []string, engineBlock string, servingBlock ...string) *fleet.Config {
	t.Helper()
	var engines []string
	for i, u := range urls {
		engines = append(engines, fmt.Sprintf(`{"iid":"e%d","url":%q,"attestation_url":%q}`, i, u, attestURLs[i]))
	}
	doc := `{"schema":"narwhal.fleet","schema_version":1,"model":"m","engines":[` + strings.Join(engines, ",") +
		`],"slo":{"ttft_s":1,"tpot_s":0.05},"engine":{` + engineBlock + `},"serving":{` + strings.Join(servingBlock, ",") + `}}`
	cfg, err := fleet.Parse("fleet.json", []byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (f *simFleet) config(t *testing.T, engineBlock string, servingBlock ...string) *fleet.Config {
	t.Helper()
	var urls, att []string
	for i, e := range f.engines {
		urls, att = append(urls, e.URL()), append(att, f.sidecars[i].AttestationURL())
	}
	return fleetOf(t, urls, att, engineBlock, servingBlock...)
}

func newProber(t *testing.T, cfg *fleet.Config, o probe.Options) *probe.Prober {
	t.Helper()
	p := probe.New(cfg, o)
	t.Cleanup(p.Close)
	return p
}

func TestFleetTimeouts(t *testing.T) {
	cfg := fleetOf(t, []string{"http://e"}, []string{""}, `"health_timeout_s":3,"first_token_timeout_s":2,"decode_read_timeout_s":0`)
	got := probe.FleetTimeouts(cfg)
	want := probe.Timeouts{Control: 3 * time.Second, FirstToken: 3 * time.Second, DecodeRead: 0,
		Prefill: units(cfg.Serving.PrefillTimeoutS), Request: units(cfg.Serving.RequestTimeoutS)}
	if got != want {
		t.Fatalf("timeouts %+v, want %+v (first token is max(first_token_timeout_s, health_timeout_s))", got, want)
	}
	cfg.Engine.FirstTokenTimeoutS = 4
	if got := probe.FleetTimeouts(cfg).FirstToken; got != 4*time.Second {
		t.Fatalf("first token %v, want 4s", got)
	}
}

func units(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestHealthAndCredential: /health takes no credential, /v1/models does;
// only a 401/403 is the credential probe's verdict (on it the router's
// TestWrongEngineKeyIsHeldOut holds the engine out).
func TestHealthAndCredential(t *testing.T) {
	tests := []struct {
		name      string
		key       string
		unhealthy bool
		health    bool // /health passes
		refused   bool // Credential.Refused
	}{
		{"accepted", "secret", false, true, false},
		{"wrong credential", "wrong", false, true, true},
		{"no credential", "", false, true, true},
		{"unhealthy", "secret", true, false, false},
	}
	f := startFleet(t, 1, func(_ int, c *simengine.Config) { c.APIKey = "secret" })
	cfg := f.config(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_ = f.engines[0].SetFaults(simengine.Faults{Unhealthy: tc.unhealthy})
			p := newProber(t, cfg, probe.Options{APIKey: tc.key})
			if e := p.Health(context.Background(), "e0"); (e == nil) != tc.health {
				t.Fatalf("Health = %v, want passing %v", e, tc.health)
			}
			cred, e := p.HealthAndCredential(context.Background(), "e0")
			if (e == nil) != tc.health {
				t.Fatalf("HealthAndCredential /health = %v, want passing %v", e, tc.health)
			}
			if tc.health && (cred.Refused() != nil) != tc.refused {
				t.Fatalf("Refused = %v, want refused %v", cred.Refused(), tc.refused)
			}
			if tc.health && !tc.refused && (cred.Err != nil || len(cred.Cards) != 1 || cred.Cards[0].ID != "m") {
				t.Fatalf("accepted credential: cards %+v err %v", cred.Cards, cred.Err)
			}
			if direct := p.Credential(context.Background(), "e0"); (direct.Refused() != nil) != tc.refused {
				t.Fatalf("Credential refused %v, want %v", direct.Refused(), tc.refused)
			}
		})
	}
}

// TestServedModel: the messages the model gate (preflight and
// readmission) shows.
func TestServedModel(t *testing.T) {
	f := startFleet(t, 2, func(i int, c *simengine.Config) {
		if i == 1 {
			c.Model = "other"
		}
	})
	cfg := f.config(t, `"health_timeout_s":0.5`)
	p := newProber(t, cfg, probe.Options{})
	if err := p.ServedModel(context.Background(), "e0"); err != nil {
		t.Fatalf("e0 serves m: %v", err)
	}
	err := p.ServedModel(context.Background(), "e1")
	if want := `e1 does not serve model "m" (serves other); cross-model KV reuse corrupts output`; err == nil || err.Error() != want {
		t.Fatalf("e1: %v, want %q", err, want)
	}
	f.engines[0].Close()
	if err := p.ServedModel(context.Background(), "e0"); err == nil || !strings.HasPrefix(err.Error(), "e0 /v1/models unreadable: ") {
		t.Fatalf("a closed engine: %v, want /v1/models unreadable", err)
	}
}
