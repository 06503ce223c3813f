package fleet

import (
	"regexp"
	"strings"
)

// wholeReference is the only reference form an endpoint may use: the
// entire value is ${NAME}.
var wholeReference = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// readEndpoint reads the value v of url or attestation_url (base) of one
// engine entry, resolving a whole-value ${NAME} reference from the
// section's lookup. A base URL loses every trailing '/'.
func readEndpoint(s section, key string, base bool, v any) string {
	raw, isStr := v.(string)
	if !isStr {
		s.wrongKind(key, "a string")
		return ""
	}
	resolved, msg := resolveReference(raw, s.lookup)
	if msg != "" {
		s.ps.add(s.field(key), "%s%s", s.field(key), msg)
		return ""
	}
	// Checked before trimming, so "http://" is "no host", not "no scheme".
	checkEndpoint(s.ps, s.field(key), base, resolved)
	if base {
		resolved = strings.TrimRight(resolved, "/")
	}
	return resolved
}

// resolveReference returns value with a whole-value reference replaced, or
// the tail of a problem message ("" when fine). Expansion never recurses.
func resolveReference(value string, lookup LookupFunc) (string, string) {
	if !strings.Contains(value, "${") {
		return value, ""
	}
	m := wholeReference.FindStringSubmatch(value)
	if m == nil {
		return "", " requires a whole-value ${VARIABLE} reference"
	}
	name := m[1]
	got, ok := lookup(name)
	if !ok || strings.TrimSpace(got) == "" {
		return "", ": environment variable " + name + " is unset or empty"
	}
	if strings.Contains(got, "${") {
		return "", ": environment variable " + name + " contains another reference"
	}
	return got, ""
}
