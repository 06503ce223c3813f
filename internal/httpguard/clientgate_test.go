package httpguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The key check: Bearer (any case) and one of the rotated keys exactly.
func TestClientKeysAuthorized(t *testing.T) {
	k := NewClientKeys([]string{"key-one", "key-two"})
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"Bearer key-one", true},
		{"Bearer key-two", true},
		{"bearer key-one", true},
		{"BEARER key-two", true},
		{"", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"key-one", false},
		{"Basic key-one", false},
		{"Bearer key-one ", false},
		{"Bearer  key-one", false},
		{"Bearer key-on", false},
		{"Bearer key-one-and-more", false},
		{"Bearer key-three", false},
	} {
		if got := k.Authorized(tc.header); got != tc.want {
			t.Errorf("Authorized(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
	if NewClientKeys(nil).Enabled() || NewClientKeys([]string{""}).Enabled() || !k.Enabled() {
		t.Error("Enabled must say whether a non-empty key is configured")
	}
}

// The 401 is OpenAI's shape, says how to fix it, and never repeats the
// key that was sent; with no keys there is no refusal.
func TestKeyRefusal(t *testing.T) {
	k := NewClientKeys([]string{"right"})
	for _, tc := range []struct {
		name, header string
		refused      bool
		says         string
	}{
		{"missing", "", true, "missing API key"},
		{"wrong", "Bearer wrong-and-secret", true, "invalid API key"},
		{"right", "Bearer right", false, ""},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		e := k.KeyRefusal(req)
		if (e != nil) != tc.refused {
			t.Fatalf("%s: refusal %v, want refused=%v", tc.name, e, tc.refused)
		}
		if e == nil {
			continue
		}
		if e.Status != 401 || e.Type != "invalid_request_error" || *e.Code != "invalid_api_key" || e.Param != nil ||
			!strings.Contains(e.Message, tc.says) || !strings.Contains(e.Message, "Authorization: Bearer") || strings.Contains(e.Message, "wrong-and-secret") {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
	if NewClientKeys(nil).KeyRefusal(httptest.NewRequest(http.MethodGet, "/v1/models", nil)) != nil {
		t.Error("without keys every request passes")
	}
}

// A /v1/* POST must declare JSON; parameters are allowed, as vLLM's
// validate_json_request allows them (it compares the media type before
// ';', lower-cased):
// https://github.com/vllm-project/vllm/blob/432a38c440655622ff7875c4877f0756c44e1fbf/vllm/entrypoints/openai/utils.py
func TestMediaRefusal(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		ok          bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON", true},
		{"application/json;charset=UTF-8", true},
		{"", false},
		{"text/plain", false},
		{"text/plain;charset=UTF-8", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonx", false},
		{"application/json-patch+json", false},
		{"application/json, text/plain", false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		e := MediaRefusal(req)
		if (e == nil) != tc.ok {
			t.Errorf("Content-Type %q: refusal %v, want ok=%v", tc.contentType, e, tc.ok)
			continue
		}
		if e != nil && (e.Status != 415 || *e.Code != "unsupported_media_type" || e.Param != nil ||
			!strings.Contains(e.Message, "Content-Type: application/json")) {
			t.Errorf("Content-Type %q: %+v", tc.contentType, e)
		}
	}
}

// CORS decisions: a listed origin gets its own origin back and Vary, a
// preflight 204 with the methods, headers and max age; anything else no
// CORS headers, and a preflight 403.
func TestCORSDecisions(t *testing.T) {
	const app = "https://app.example.com"
	for _, tc := range []struct {
		name    string
		origins []string
		origin  string
		allowed bool
		vary    bool
		preflt  int // preflight status: 204, or 403 in OpenAI's shape
	}{
		{"listed", []string{app}, app, true, true, 204},
		{"one of several", []string{"http://127.0.0.1:5173", app}, app, true, true, 204},
		{"unlisted", []string{app}, "https://evil.example", false, true, 403},
		{"same host, other scheme", []string{app}, "http://app.example.com", false, true, 403},
		{"opaque origin", []string{app}, "null", false, true, 403},
		{"no origins configured", nil, app, false, false, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCORS(tc.origins)
			req := httptest.NewRequest(http.MethodOptions, "/v1/chat/completions", nil)
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			h := http.Header{}
			if got := c.Decorate(h, req); got != tc.allowed {
				t.Fatalf("Decorate allowed %v, want %v", got, tc.allowed)
			}
			if acao := h.Get("Access-Control-Allow-Origin"); (acao == tc.origin) != tc.allowed || (!tc.allowed && acao != "") {
				t.Errorf("Access-Control-Allow-Origin %q", acao)
			}
			if vary := strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin"); vary != tc.vary {
				t.Errorf("Vary %v, want Vary: Origin %v", h.Values("Vary"), tc.vary)
			}
			if !IsPreflight(req) {
				t.Fatal("an OPTIONS with Origin and Access-Control-Request-Method is a preflight")
			}
			e := c.Preflight(h, req)
			switch {
			case tc.preflt == 204 && e != nil:
				t.Fatalf("preflight refused: %v", e)
			case tc.preflt == 204:
				if h.Get("Access-Control-Allow-Methods") != "GET, POST" || h.Get("Access-Control-Max-Age") != "600" ||
					!AllowsHeaders("authorization, content-type, x-stainless-os, x-stainless-retry-count, x-stainless-timeout") {
					t.Errorf("preflight headers %v", h)
				}
			case e == nil || e.Status != 403 || *e.Code != "cors_origin_not_allowed" || !strings.Contains(e.Message, "serving.cors_origins"):
				t.Errorf("preflight from %q: %+v, want a 403 naming serving.cors_origins", tc.origin, e)
			case h.Get("Access-Control-Allow-Methods") != "":
				t.Errorf("a refused preflight carries CORS headers: %v", h)
			}
		})
	}
	if AllowsHeaders("x-api-key") {
		t.Error("AllowsHeaders accepts a header the preflight does not list")
	}
	plain := httptest.NewRequest(http.MethodOptions, "/v1/models", nil)
	if IsPreflight(plain) {
		t.Error("an OPTIONS without Origin is not a preflight")
	}
}

// net/http's CrossOriginProtection backs the hand-made check: an Origin
// with an explicit default port passes sameOrigin but not Check, so the
// admin guard refuses it.
func TestCrossOriginProtectionBacksTheAdminGuard(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/narwhal/lifecycle/drain", nil)
	req.Host = "router.example"
	req.Header.Set("Origin", "http://router.example:80")
	if !sameOrigin(req.Header.Get("Origin"), req) {
		t.Fatal("premise: the hand-made comparison treats the default port as absent")
	}
	e := OriginRefusal(req, false)
	if e == nil || e.Status != 403 || *e.Code != "cross_site_request" || !strings.Contains(e.Message, "CrossOriginProtection") {
		t.Fatalf("refusal %+v, want CrossOriginProtection's 403", e)
	}
}

// What the key check costs per request with two rotated keys (a SHA-256
// of the token and two constant-time compares).
func BenchmarkClientKeysAuthorized(b *testing.B) {
	k := NewClientKeys([]string{"sk-" + strings.Repeat("a", 61), "sk-" + strings.Repeat("b", 61)})
	h := "Bearer sk-" + strings.Repeat("b", 61)
	for b.Loop() {
		if !k.Authorized(h) {
			b.Fatal("refused")
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer k", "k", true}, {"bearer k", "k", true}, {"BEARER k", "k", true},
		{"Basic k", "", false}, {"Bearer", "", false}, {"Bearer ", "", false}, {"", "", false},
	} {
		if token, ok := BearerToken(tc.header); token != tc.token || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
