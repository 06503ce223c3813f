package router

import (
	"crypto/subtle"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/httpguard"
)

// The admin routes' guards are httpguard's (origin, Sec-Fetch-Site,
// loopback Host, JSON body); these adapt them to the router's outcomes.

// IsLoopback reports whether host binds only the loopback interface: the
// one case where lifecycle actions are allowed without an admin token.
func IsLoopback(host string) bool { return httpguard.IsLoopback(host) }

func originRefusal(req *http.Request, open bool) *apiError {
	return wire(httpguard.OriginRefusal(req, open))
}

func mediaRefusal(req *http.Request) *apiError { return wire(httpguard.MediaRefusal(req)) }

// adminError is an OpenAI-shaped refusal of an admin request: the
// client's mistake, so invalid_request_error with narwhal's reason in code.
func adminError(status int, code, msg string) *apiError { return invalid(status, code, msg) }

// admin guards the lifecycle actions: a same-site request (originRefusal),
// the bearer token when one is configured (without one, only a router
// bound to loopback accepts them), and a JSON body (mediaRefusal).
func (r *Router) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		open := r.adminToken == ""
		if open && !r.adminOpen {
			adminError(http.StatusForbidden, "admin_disabled", "lifecycle actions are disabled: start narwhal-serve with --admin-token-env NAME, or bind it to loopback").write(w)
			return
		}
		if e := originRefusal(req, open); e != nil {
			e.write(w)
			return
		}
		if !open && subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte("Bearer "+r.adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			adminError(http.StatusUnauthorized, "invalid_admin_token", "lifecycle actions need the admin token: send -H 'Authorization: Bearer TOKEN' with the token (the value of the variable --admin-token-env names; make run prints it)").write(w)
			return
		}
		if e := mediaRefusal(req); e != nil {
			e.write(w)
			return
		}
		h(w, req)
	}
}
