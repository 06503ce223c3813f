package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/openai"
)

// DNS rebinding: a web page at attacker.example whose name the attacker
// re-points at 127.0.0.1 is, to the browser, same-origin with a router
// on the operator's loopback, so it may read /narwhal/state and
// /narwhal/handoff and post completions. Its requests still carry
// Host: attacker.example. A router bound to loopback therefore answers
// only requests addressed to a loopback name, an IP address (an IP
// literal cannot be rebound) or a host the operator allowed.

// HostGuard says which Host headers reach the router.
type HostGuard struct {
	// Loopback is set when the router binds only loopback: names other
	// than localhost (and *.localhost) are refused unless Allowed.
	Loopback bool
	// Allowed are extra host names (no port, any case); "*.example.com"
	// matches every name under example.com. Set on a router bound to a
	// routable address, they are the only names it answers.
	Allowed []string
}

// Refusal is the error for a request addressed to a host the guard does
// not allow, nil when it may pass.
func (g HostGuard) Refusal(req *http.Request) *openai.Error {
	if !g.Loopback && len(g.Allowed) == 0 {
		return nil
	}
	host := hostOnly(req.Host)
	if g.allows(host) {
		return nil
	}
	hint := "address it as http://127.0.0.1:PORT or http://localhost:PORT, or start the router with --allowed-hosts " + quoteHost(host)
	if !g.Loopback {
		hint = "address it by IP or by one of --allowed-hosts " + quoteHost(strings.Join(g.Allowed, ","))
	}
	return openai.Invalid(http.StatusMisdirectedRequest, "host_not_allowed",
		"request addressed to Host "+quoteHost(req.Host)+", which this router does not answer (DNS-rebinding guard): "+hint)
}

func (g HostGuard) allows(host string) bool {
	switch {
	case host == "": // HTTP/1.0 without Host: no browser sends that
		return true
	case net.ParseIP(host) != nil:
		return true
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return true
	}
	for _, a := range g.Allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

// hostOnly is the lower-case host of a Host header, without its port,
// brackets or a trailing dot.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// CheckAllowed refuses an --allowed-hosts entry that could never match a
// Host header's name: empty, with a scheme, path or port, or a wildcard
// other than a leading "*.".
func CheckAllowed(names []string) error {
	for _, n := range names {
		name := strings.TrimPrefix(strings.TrimSpace(n), "*.")
		if name == "" || strings.ContainsAny(name, ":/*[] ") {
			return fmt.Errorf("--allowed-hosts entry %s: give a host name without scheme, port or path (e.g. router.example.com or *.example.com)", quoteHost(n))
		}
	}
	return nil
}
