package httpguard

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:8000", "127.0.0.1:8000", true},
		{"http://LOCALHOST:8000", "localhost:8000", true},
		{"http://[::1]:8000", "[::1]:8000", true},
		{"https://router.example", "router.example", true}, // behind a TLS proxy
		{"https://router.example", "router.example:443", true},
		{"http://router.example:80", "router.example", true},
		{"http://127.0.0.1:3000", "127.0.0.1:8000", false},
		{"http://evil.example", "127.0.0.1:8000", false},
		{"http://127.0.0.1", "127.0.0.1:8000", false},
		{"null", "127.0.0.1:8000", false},
		{"file://", "127.0.0.1:8000", false},
		{"chrome-extension://abc", "abc", false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/narwhal/lifecycle/drain", nil)
		req.Host = tc.host
		if got := sameOrigin(tc.origin, req); got != tc.want {
			t.Errorf("sameOrigin(%q, Host %q) = %v, want %v", tc.origin, tc.host, got, tc.want)
		}
	}
}

// The guards refuse a cross-site or non-JSON admin request in OpenAI's
// shape with a code and a message naming the fix; without a token only a
// loopback Host passes.
func TestAdminGuards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		open    bool
		headers map[string]string
		status  int // 0: passes both guards
		code    string
		fix     string
	}{
		{"curl with JSON", "127.0.0.1:8000", true, map[string]string{"Content-Type": "application/json"}, 0, "", ""},
		{"same origin", "localhost:8000", true, map[string]string{"Origin": "http://localhost:8000", "Sec-Fetch-Site": "same-origin",
			"Content-Type": "application/json; charset=utf-8"}, 0, "", ""},
		{"any host with a token", "router.example", false, map[string]string{"Content-Type": "application/json"}, 0, "", ""},
		{"cross-site origin", "127.0.0.1:8000", false, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"},
			403, "cross_site_request", "Origin"},
		{"sec-fetch-site", "127.0.0.1:8000", false, map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
			403, "cross_site_request", "Sec-Fetch-Site"},
		{"open and not loopback", "evil.example:8000", true, map[string]string{"Content-Type": "application/json"},
			403, "admin_host_not_loopback", "--admin-token-env"},
		{"text/plain", "127.0.0.1:8000", true, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "Content-Type: application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/narwhal/lifecycle/drain", nil)
			req.Host = tc.host
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			e := OriginRefusal(req, tc.open)
			if e == nil {
				e = MediaRefusal(req)
			}
			switch {
			case tc.status == 0 && e != nil:
				t.Fatalf("refused: %d %s", e.Status, e.Message)
			case tc.status == 0:
			case e == nil:
				t.Fatalf("passed; want %d %s", tc.status, tc.code)
			case e.Status != tc.status || e.Type != "invalid_request_error" || e.Code == nil || *e.Code != tc.code || !strings.Contains(e.Message, tc.fix):
				t.Fatalf("%d %s %v %q, want %d %s naming %q", e.Status, e.Type, e.Code, e.Message, tc.status, tc.code, tc.fix)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "127.0.0.2": true,
		"0.0.0.0": false, "10.0.0.1": false, "router.example": false, "": false} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// Each address has its own slots; giving one back frees it, and the
// total counts every client.
func TestBodyReads(t *testing.T) {
	var b BodyReads
	if first, second := b.Take("a", 2), b.Take("a", 2); !first || !second {
		t.Fatal("a's two slots refused")
	}
	if b.Take("a", 2) {
		t.Fatal("a third body from a was admitted over the limit of 2")
	}
	if !b.Take("b", 2) {
		t.Fatal("another address was refused because of a")
	}
	if n := b.Total(); n != 3 {
		t.Fatalf("total %d, want 3", n)
	}
	b.Done("a")
	if !b.Take("a", 2) {
		t.Fatal("a freed slot was not reusable")
	}
	b.Done("a")
	b.Done("a")
	b.Done("b")
	if n := b.Total(); n != 0 || b.addresses() != 0 {
		t.Fatalf("after every Done: total %d, %d addresses kept", n, b.addresses())
	}
}

func TestClientIPAndIsTimeout(t *testing.T) {
	for addr, want := range map[string]string{"10.1.2.3:5555": "10.1.2.3", "[::1]:80": "::1", "pipe": "pipe"} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.RemoteAddr = addr
		if got := ClientIP(req); got != want {
			t.Errorf("ClientIP(%q) = %q, want %q", addr, got, want)
		}
	}
	if !IsTimeout(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)) || IsTimeout(errors.New("connection reset")) {
		t.Error("IsTimeout must hold for a deadline and only for one")
	}
}
