package router

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// Engines started with an API key (vllm serve --api-key) serve the router
// only with the credential named by engine.engine_api_key_env; the value
// never reaches the journal.
func TestEngineCredential(t *testing.T) {
	const secret = "engine-s3cret-value"
	fl, err := simengine.StartFleet(2, simengine.Config{Model: model, Profile: simengine.DefaultProfile("x"), APIKey: secret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	for _, tc := range []struct {
		name   string
		env    map[string]string
		status int
	}{
		{"with the credential", map[string]string{"ENGINE_KEY": secret}, 200},
		// Held out at start (engine-auth), not 502 on every request.
		{"with a wrong credential", map[string]string{"ENGINE_KEY": "wrong"}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fleet.Defaults()
			cfg.Model, cfg.SLO = model, fleet.SLO{TTFT: 2, TPOT: 0.1}
			cfg.Engine.EngineAPIKeyEnv = "ENGINE_KEY"
			store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
			for i, u := range fl.URLs() {
				role := fleet.Prefill
				if i == 1 {
					role = fleet.Decode
				}
				iid := fmt.Sprintf("e%d", i)
				cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: u, Role: role})
				store.Profiles = append(store.Profiles, simengine.DefaultProfile(iid))
			}
			if err := cfg.Validate("test"); err != nil {
				t.Fatal(err)
			}
			jpath := filepath.Join(t.TempDir(), "j.jsonl")
			jw, _ := journal.Open(jpath, journal.Options{Source: "sha256:" + strings.Repeat("0", 64)})
			defer jw.Close()
			r, err := New(&cfg, store, Options{Journal: jw, Lookup: env(tc.env)})
			if err != nil {
				t.Fatal(err)
			}
			r.Start()
			defer r.Close()
			srv := httptest.NewServer(r)
			defer srv.Close()
			h := &harness{t: t, srv: srv}
			resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "auth", "max_tokens": 2})
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, out, tc.status)
			}
			jw.Close()
			if b, _ := readFile(jpath); strings.Contains(b, secret) {
				t.Error("the engine credential reached the journal")
			}
		})
	}
	cfg := fleet.Defaults()
	cfg.Engine.EngineAPIKeyEnv = "UNSET_ENGINE_KEY"
	cfg.Engines = []fleet.Engine{{IID: "e0", URL: fl.URLs()[0], Role: fleet.Decode}}
	store := &profile.Store{Profiles: []profile.Row{simengine.DefaultProfile("e0")}}
	if _, err := New(&cfg, store, Options{Lookup: env(nil)}); err == nil || !strings.Contains(err.Error(), "UNSET_ENGINE_KEY is not set") {
		t.Errorf("an unset credential variable must refuse to start: %v", err)
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
