package router

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/httpguard"
)

// A router on loopback refuses, on every route, a request addressed to a
// name a rebinding page would use (421, OpenAI's error shape, no retry),
// and answers one addressed to 127.0.0.1 or localhost.
func TestLoopbackRouterRefusesRebindingHosts(t *testing.T) {
	h := newHarness(t, ppdd, nil, func(o *Options) { o.Hosts = httpguard.HostGuard{Loopback: true} })
	for _, tc := range []struct {
		method, path, host string
		want               int
	}{
		{http.MethodGet, "/narwhal/state", "attacker.example:80", http.StatusMisdirectedRequest},
		{http.MethodGet, "/narwhal/handoff", "attacker.example", http.StatusMisdirectedRequest},
		{http.MethodGet, "/metrics", "attacker.example", http.StatusMisdirectedRequest},
		{http.MethodPost, "/v1/completions", "attacker.example", http.StatusMisdirectedRequest},
		{http.MethodGet, "/narwhal/state", "", http.StatusOK}, // the test server's own 127.0.0.1:port
		{http.MethodGet, "/narwhal/state", "localhost", http.StatusOK},
		{http.MethodPost, "/v1/completions", "", http.StatusOK},
	} {
		var body io.Reader
		if tc.method == http.MethodPost {
			body = strings.NewReader(`{"model":"sim-model","prompt":"hi","max_tokens":2}`)
		}
		req, _ := http.NewRequestWithContext(ctx(t), tc.method, h.srv.URL+tc.path, body)
		req.Header.Set("Content-Type", "application/json")
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tc.method == http.MethodPost && resp.StatusCode == http.StatusOK {
			h.noteRID(resp) // a served completion has its journal row
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s Host %q: %d %s, want %d", tc.method, tc.path, tc.host, resp.StatusCode, out, tc.want)
			continue
		}
		if tc.want == http.StatusMisdirectedRequest {
			if !strings.Contains(string(out), `"code":"host_not_allowed"`) || resp.Header.Get("x-should-retry") != "false" {
				t.Errorf("%s %s: refusal %s (x-should-retry %q), want host_not_allowed and no retry", tc.method, tc.path, out,
					resp.Header.Get("x-should-retry"))
			}
		}
	}
}
