package router

import (
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
