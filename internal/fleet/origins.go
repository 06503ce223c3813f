package fleet

import (
	"fmt"
	"net/url"
	"strings"
)

// origins checks serving.cors_origins: each entry is one browser origin
// written as browsers send it in the Origin header (lower-case
// scheme://host, a port only when it is not the scheme's default, no path),
// so the router can compare it byte for byte. "*" is refused: a router
// that may hold client keys names the pages it trusts.
func origins(ps *problems, path string, f field) {
	for i, o := range *f.strs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if o == "*" {
			ps.add(p, "%s is '*': list each allowed origin, e.g. https://app.example.com", p)
			continue
		}
		if canon, ok := CanonicalOrigin(o); !ok || canon != o {
			ps.add(p, "%s must be an origin as browsers send it, scheme://host[:port] with no path or trailing '/', e.g. %s, got '%s'", p, suggestOrigin(o), o)
		}
	}
}

// CanonicalOrigin is o as a browser serializes it in the Origin header,
// and whether o is an http(s) origin at all.
func CanonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return strings.ToLower(u.Scheme) + "://" + host, true
}

func suggestOrigin(o string) string {
	if canon, ok := CanonicalOrigin(o); ok {
		return canon
	}
	return "https://app.example.com"
}
