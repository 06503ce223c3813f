package router

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// A web page the operator visits must not reach the admin routes: a
// browser sends a cross-site form post (text/plain, no preflight) with its
// Origin and Sec-Fetch-Site; the router refuses it before any engine is
// touched, in OpenAI's error shape with a message saying how to fix it.
// Same-origin JSON with the token still drains.
func TestAdminRoutesRefuseCrossSiteAndNonJSON(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) { fastRecovery(c); completeContract(c) })
	for _, open := range []bool{true, false} {
		token := ""
		if !open {
			token = "s3cret"
		}
		h.router.adminToken = token
		host := strings.TrimPrefix(h.srv.URL, "http://")
		for _, tc := range []struct {
			name    string
			headers map[string]string
			status  int
			code    string
			fix     string
		}{
			{"cross-site origin", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403, "cross_site_request", "Origin"},
			{"cross-site origin with JSON", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403, "cross_site_request", "Origin"},
			{"other port on the same host", map[string]string{"Origin": "http://" + strings.Split(host, ":")[0] + ":1", "Content-Type": "application/json"}, 403, "cross_site_request", "Origin"},
			{"opaque origin", map[string]string{"Origin": "null", "Content-Type": "application/json"}, 403, "cross_site_request", "Origin"},
			{"sec-fetch-site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, 403, "cross_site_request", "Sec-Fetch-Site"},
			{"sec-fetch-site same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, 403, "cross_site_request", "Sec-Fetch-Site"},
			{"text/plain", map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "Content-Type: application/json"},
			{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", "Content-Type: application/json"},
			{"no content type", map[string]string{}, 415, "unsupported_media_type", "Content-Type: application/json"},
		} {
			t.Run(fmt.Sprintf("token=%v/%s", !open, tc.name), func(t *testing.T) {
				resp, body := adminPost(t, h.srv.URL+"/narwhal/lifecycle/drain", `{"iid":"d1"}`, token, tc.headers)
				if resp.StatusCode != tc.status {
					t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.status)
				}
				var e struct {
					Error struct {
						Message, Type string
						Code          *string
					}
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "invalid_request_error" || e.Error.Code == nil ||
					*e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.fix) {
					t.Fatalf("not an OpenAI error with code %s naming %q: %s", tc.code, tc.fix, body)
				}
				if !h.router.av.Usable("d1") {
					t.Fatal("a refused request drained the engine")
				}
			})
		}
	}
	// Same origin (a page the router itself served, or curl with no Origin)
	// with JSON and the token drains.
	h.router.adminToken = "s3cret"
	resp, body := adminPost(t, h.srv.URL+"/narwhal/lifecycle/drain", `{"iid":"d1"}`, "s3cret",
		map[string]string{"Origin": h.srv.URL, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json; charset=utf-8"})
	if resp.StatusCode != 200 || h.router.av.Usable("d1") {
		t.Fatalf("same-origin JSON drain with the token: %d %s", resp.StatusCode, body)
	}
}

// Without a token the admin routes answer only requests addressed to a
// loopback name: a DNS-rebound page (Host: evil.example, same origin as
// itself) is refused.
func TestOpenAdminRoutesNeedALoopbackHost(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) { fastRecovery(c); completeContract(c) })
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/narwhal/lifecycle/drain", strings.NewReader(`{"iid":"d1"}`))
	req.Host = "evil.example:" + strings.Split(strings.TrimPrefix(h.srv.URL, "http://"), ":")[1]
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://"+req.Host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "admin token") || !h.router.av.Usable("d1") {
		t.Fatalf("rebound host without a token: %d %s (d1 live %v)", resp.StatusCode, body, h.router.av.Usable("d1"))
	}
}

func adminPost(t *testing.T, url, body, token string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// The admin token is read under the Bearer scheme in any case (RFC 9110:
// schemes are case-insensitive), and only under it.
func TestAdminTokenSchemeInAnyCase(t *testing.T) {
	h := newHarness(t, ppdd, func(c *fleet.Config) { fastRecovery(c); completeContract(c) })
	h.router.adminToken = "s3cret"
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"Basic s3cret", 401},
		{"bearer wrong", 401},
		{"bearer", 401},
		{"bearer s3cret", 200},
	} {
		hdr := map[string]string{"Authorization": tc.auth, "Content-Type": "application/json"}
		resp, body := adminPost(t, h.srv.URL+"/narwhal/lifecycle/drain", `{"iid":"d1"}`, "", hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("Authorization %q: %d %s, want %d", tc.auth, resp.StatusCode, body, tc.status)
		}
	}
}
