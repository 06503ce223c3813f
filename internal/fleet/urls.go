package fleet

import (
	"net/url"
	"strings"
)

// checkEndpoint reports an engine endpoint that is not an http or https
// URL with a host. base is true for engines[].url, which must be set and
// carries no query or fragment because request paths are appended to it;
// an empty attestation_url means "no sidecar" and is fine. Messages never
// echo the value: it may hold credentials or come from the environment.
func checkEndpoint(ps *problems, field string, base bool, v string) {
	if v == "" && !base {
		return
	}
	if why := endpointProblem(v); why != "" {
		example := "http://10.0.0.10:8000"
		if !base {
			example = "http://10.0.0.10:8010/v1/attestation"
		}
		ps.add(field, "%s must be an http:// or https:// URL with a host (e.g. %s): %s", field, example, why)
		return
	}
	if base && strings.ContainsAny(v, "?#") {
		ps.add(field, "%s is a base URL and must not carry a query or fragment: request paths are appended to it", field)
	}
}

// endpointProblem says why v is not an absolute http or https URL with a
// host, or returns "".
func endpointProblem(v string) string {
	if v == "" {
		return "it is empty"
	}
	// Checked first: url.Parse reads "node2:8000" as scheme "node2".
	if !strings.Contains(v, "://") {
		return "it has no scheme"
	}
	u, err := url.Parse(v)
	if err != nil {
		return "it does not parse"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "its scheme is '" + u.Scheme + "'"
	}
	if u.Hostname() == "" {
		return "it has no host"
	}
	return ""
}
