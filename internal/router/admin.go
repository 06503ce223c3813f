package router

import (
	"crypto/subtle"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/httpguard"
	"github.com/narwhal-go/narwhal/internal/openai"
)

// The admin routes' guards are httpguard's (origin, Sec-Fetch-Site,
// loopback Host, JSON body); admin applies them in order.

// admin guards the lifecycle actions: a same-site request (httpguard.OriginRefusal),
// the bearer token when one is configured (without one, only a router
// bound to loopback accepts them), and a JSON body (httpguard.MediaRefusal).
func (r *Router) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		open := r.adminToken == ""
		if open && !r.adminOpen {
			openai.Invalid(http.StatusForbidden, "admin_disabled", "lifecycle actions are disabled: start narwhal-serve with --admin-token-env NAME, or bind it to loopback").Write(w)
			return
		}
		if e := httpguard.OriginRefusal(req, open); e != nil {
			e.Write(w)
			return
		}
		if token, _ := httpguard.BearerToken(req.Header.Get("Authorization")); !open && subtle.ConstantTimeCompare([]byte(token), []byte(r.adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			openai.Invalid(http.StatusUnauthorized, "invalid_admin_token", "lifecycle actions need the admin token: send -H 'Authorization: Bearer TOKEN' with the token (the value of the variable --admin-token-env names; make run prints it)").Write(w)
			return
		}
		if e := httpguard.MediaRefusal(req); e != nil {
			e.Write(w)
			return
		}
		h(w, req)
	}
}
