// Package httpguard holds the router's HTTP guards: the checks that keep a
// browser page from driving the admin routes (origin, Sec-Fetch-Site,
// loopback Host, JSON body), the client API keys and CORS rules of /v1/*,
// the per-client accounting that bounds how
// many request bodies one address may be sending at once, and which
// client request ids may be echoed back.
package httpguard

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/narwhal-go/narwhal/internal/openai"
)

// Guards for the routes that change the fleet (drain, readmit). A browser
// lets any web page send a "simple" cross-site POST (text/plain or a form,
// no CORS preflight) to a router on the operator's machine; these checks
// make such a request fail before it reaches a handler: the body must be
// JSON (which a cross-site page cannot send without a preflight the router
// never answers) and the browser's Origin / Sec-Fetch-Site must say the
// request came from the router's own origin or from no page at all.

// OriginRefusal refuses a request from another site, and, with no
// token configured (open), one not addressed to a loopback name.
func OriginRefusal(req *http.Request, open bool) *openai.Error {
	if e := crossSite(req); e != nil {
		return e
	}
	if open && !loopbackHost(req.Host) {
		// No token: only requests addressed to loopback, so a page whose
		// name was rebound to 127.0.0.1 (same origin as itself) is refused.
		return openai.Invalid(http.StatusForbidden, "admin_host_not_loopback",
			"lifecycle actions without an admin token are accepted only for requests addressed to localhost or a loopback IP, not Host "+quoteHost(req.Host)+": use http://127.0.0.1:PORT, or start the router with --admin-token-env NAME")
	}
	return nil
}

// MediaRefusal refuses a body that is not declared JSON.
func MediaRefusal(req *http.Request) *openai.Error {
	if jsonBody(req) {
		return nil
	}
	return openai.Invalid(http.StatusUnsupportedMediaType, "unsupported_media_type",
		req.Method+" "+req.URL.Path+" needs a JSON body: send the header Content-Type: application/json (curl: -H 'Content-Type: application/json')")
}

// crossSite refuses a request a browser marks as coming from another
// site: an Origin whose host:port is not the request's Host, or
// Sec-Fetch-Site other than same-origin / none. curl and SDKs send
// neither header and pass.
func crossSite(req *http.Request) *openai.Error {
	if o := req.Header.Get("Origin"); o != "" && !sameOrigin(o, req) {
		return openai.Invalid(http.StatusForbidden, "cross_site_request",
			"cross-site request refused: Origin "+quoteHost(o)+" is not this router ("+quoteHost(req.Host)+"); send lifecycle actions from curl or a script (no Origin header), not from a web page")
	}
	switch s := strings.ToLower(req.Header.Get("Sec-Fetch-Site")); s {
	case "", "same-origin", "none":
	default:
		return openai.Invalid(http.StatusForbidden, "cross_site_request",
			"cross-site request refused: Sec-Fetch-Site is "+quoteHost(s)+"; send lifecycle actions from curl or a script, not from another web page")
	}
	// net/http's own check as well (Go 1.25): the same rules, kept in step
	// with the browsers by the standard library; the checks above stay for
	// their messages and for comparing the scheme's port.
	if err := crossOrigin.Check(req); err != nil {
		return openai.Invalid(http.StatusForbidden, "cross_site_request",
			"cross-site request refused by net/http CrossOriginProtection (Origin "+quoteHost(req.Header.Get("Origin"))+"); send lifecycle actions from curl or a script, not from a web page")
	}
	return nil
}

// crossOrigin is net/http's CSRF protection with no exceptions: no
// trusted origins, no bypass patterns.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin compares the Origin's host:port with the Host the request
// was sent to, each without a port taking the default of the Origin's
// scheme (a client omits the default port from both; behind a TLS proxy
// the scheme is the browser's, not ours). "null" (an opaque origin) never
// matches.
func sameOrigin(origin string, req *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return withPort(u.Host, u.Scheme) == withPort(req.Host, u.Scheme)
}

func withPort(hostport, scheme string) string {
	hostport = strings.ToLower(hostport)
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(hostport, "[]"), port)
}

// IsLoopback reports whether host binds only the loopback interface: the
// one case where lifecycle actions are allowed without an admin token.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return IsLoopback(strings.ToLower(strings.Trim(host, "[]")))
}

func jsonBody(req *http.Request) bool {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// quoteHost keeps a client-supplied header value short and on one line
// in an error message.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, s) + `"`
}
