package httpguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHostGuard(t *testing.T) {
	loop := HostGuard{Loopback: true}
	loopPlus := HostGuard{Loopback: true, Allowed: []string{"router.lan", "*.corp.example"}}
	routable := HostGuard{}
	restricted := HostGuard{Allowed: []string{"narwhal.svc"}}
	for _, tc := range []struct {
		name  string
		g     HostGuard
		host  string
		allow bool
	}{
		{"loopback ip", loop, "127.0.0.1:8000", true},
		{"ipv6 loopback", loop, "[::1]:8000", true},
		{"localhost", loop, "localhost:8000", true},
		{"localhost any case, trailing dot", loop, "LocalHost.:8000", true},
		{"sub.localhost", loop, "app.localhost:8000", true},
		{"any ip literal", loop, "10.0.0.5:8000", true},
		{"rebound name", loop, "attacker.example:8000", false},
		{"rebound name without port", loop, "attacker.example", false},
		{"localhost as a prefix is not localhost", loop, "localhost.attacker.example", false},
		{"allowed name", loopPlus, "Router.LAN:8000", true},
		{"allowed wildcard", loopPlus, "a.b.corp.example", true},
		{"wildcard is not its apex", loopPlus, "corp.example", false},
		{"routable answers any name", routable, "narwhal.default.svc:8000", true},
		{"routable with a list answers only it", restricted, "narwhal.svc:8000", true},
		{"routable with a list refuses others", restricted, "attacker.example", false},
		{"routable with a list still answers IPs", restricted, "10.1.2.3:8000", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/narwhal/state", nil)
			req.Host = tc.host
			e := tc.g.Refusal(req)
			if got := e == nil; got != tc.allow {
				t.Fatalf("Host %q allowed=%v, want %v (%v)", tc.host, got, tc.allow, e)
			}
			if e != nil && (e.Status != http.StatusMisdirectedRequest || !strings.Contains(e.Message, "--allowed-hosts")) {
				t.Fatalf("refusal %d %q: want 421 naming --allowed-hosts", e.Status, e.Message)
			}
		})
	}
}

func TestCheckAllowed(t *testing.T) {
	for _, tc := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"router.lan", "*.corp.example"}, true},
		{[]string{"http://router.lan"}, false},
		{[]string{"router.lan:8000"}, false},
		{[]string{""}, false},
		{[]string{"a.*.example"}, false},
	} {
		if err := CheckAllowed(tc.names); (err == nil) != tc.ok {
			t.Errorf("CheckAllowed(%q) = %v, want ok=%v", tc.names, err, tc.ok)
		}
	}
}
