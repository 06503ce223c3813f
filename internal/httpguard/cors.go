package httpguard

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/openai"
)

// CORS decides which browser pages may call /v1/*: the origins of
// serving.cors_origins, compared byte for byte with the Origin header
// (the fleet loader keeps only origins as browsers serialize them). No
// origins means no CORS headers at all, so a browser lets no other page
// read an answer or send a preflighted (JSON, or with Authorization)
// request.
type CORS struct {
	origins map[string]bool
}

// Preflight answers, for a listed origin.
const (
	corsMethods = "GET, POST"
	// The request headers a page may send: the key, the JSON body type,
	// and what OpenAI's JavaScript SDK adds in a browser (buildHeaders and
	// getPlatformHeaders):
	// https://github.com/openai/openai-node/blob/e3a0a9c8b01d0e38e96bfee10ff539aa282db4ed/src/client.ts
	// https://github.com/openai/openai-node/blob/02f39a94351fa5a5814a0873f53ea228679ae059/src/internal/detect-platform.ts
	// plus X-Stainless-Helper-Method, which newer SDK releases send, and
	// X-Request-Id, which the router echoes.
	corsHeaders = "Authorization, Content-Type, X-Request-Id, OpenAI-Organization, OpenAI-Project, " +
		"X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, " +
		"X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, " +
		"X-Stainless-Helper-Method"
	// What a page may read besides the safelisted headers: the ids an SDK
	// logs and the back-off it obeys.
	corsExpose = "X-Request-Id, X-Narwhal-Request-Id, Retry-After"
	// CORSMaxAge is how long a browser may reuse a preflight (Chromium
	// caps it at two hours; ten minutes keeps a removed origin's reach short).
	CORSMaxAge = 600
)

// NewCORS allows origins.
func NewCORS(origins []string) CORS {
	c := CORS{origins: map[string]bool{}}
	for _, o := range origins {
		c.origins[o] = true
	}
	return c
}

// Enabled reports whether any origin is listed.
func (c CORS) Enabled() bool { return len(c.origins) > 0 }

// Allowed reports whether origin is listed.
func (c CORS) Allowed(origin string) bool { return origin != "" && c.origins[origin] }

// Decorate adds the headers every /v1/* answer carries: with origins
// listed, Vary: Origin (the answer differs by Origin, caches must know),
// and for a listed Origin the allow and expose headers. It reports
// whether the request's origin is allowed.
func (c CORS) Decorate(h http.Header, req *http.Request) bool {
	if !c.Enabled() {
		return false
	}
	h.Add("Vary", "Origin")
	origin := req.Header.Get("Origin")
	if !c.Allowed(origin) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExpose)
	return true
}

// IsPreflight reports whether req is a CORS preflight: OPTIONS from a
// page, naming the method it wants to send.
func IsPreflight(req *http.Request) bool {
	return req.Method == http.MethodOptions && req.Header.Get("Origin") != "" &&
		req.Header.Get("Access-Control-Request-Method") != ""
}

// Preflight answers a preflight: 204 with the allowed methods and
// headers for a listed origin (Decorate already set the origin), else
// the 403 it returns.
func (c CORS) Preflight(h http.Header, req *http.Request) *openai.Error {
	origin := req.Header.Get("Origin")
	if !c.Allowed(origin) {
		return openai.Invalid(http.StatusForbidden, "cors_origin_not_allowed",
			"cross-origin request refused: Origin "+quoteHost(origin)+" is not in serving.cors_origins; add that exact origin to the fleet file to let its pages call this router")
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", strconv.Itoa(CORSMaxAge))
	return nil
}

// AllowsHeaders reports whether every header of an
// Access-Control-Request-Headers value is one a preflight allows (the
// browser makes this check; tests use it to keep the list honest).
func AllowsHeaders(requested string) bool {
	allowed := map[string]bool{}
	for _, a := range strings.Split(corsHeaders, ",") {
		allowed[strings.ToLower(strings.TrimSpace(a))] = true
	}
	for _, r := range strings.Split(requested, ",") {
		if r = strings.ToLower(strings.TrimSpace(r)); r != "" && !allowed[r] {
			return false
		}
	}
	return true
}
