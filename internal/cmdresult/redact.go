package cmdresult

import (
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces every secret the redactor finds.
const Redacted = "[REDACTED]"

var (
	credentialName = regexp.MustCompile(`(?i)KEY|TOKEN|PASSWORD|SECRET|CREDENTIAL`)
	urlUserinfo    = regexp.MustCompile(`(?i)\b(https?://)[^/\s@]+@`)
	bearer         = regexp.MustCompile(`(?i)\b(Bearer\s+)[^\s"']+`)
	secretQuery    = regexp.MustCompile(`(?i)([?&](?:api_key|api-key|apikey|token|password|secret)=)[^&\s#"']*`)
	hexDigest      = regexp.MustCompile(`^(sha256:)?[0-9a-fA-F]{40,128}$`)
	knownSchema    = regexp.MustCompile(`^narwhal\.[a-z-]+$`)
)

// Redactor hides credentials in command output: the values of credential-
// like environment variables and of the configured engine key variable,
// URL user-info, Bearer tokens and secret query parameters.
type Redactor struct {
	secrets []string // longest first, so a secret inside another is not left half-hidden
}

// NewRedactor collects secrets from environ (KEY=VALUE strings): every value
// of a variable whose name looks like a credential, plus the variables
// named in extraNames (such as engine.engine_api_key_env).
func NewRedactor(environ []string, extraNames ...string) *Redactor {
	extra := map[string]bool{}
	for _, n := range extraNames {
		if n != "" {
			extra[n] = true
		}
	}
	r := &Redactor{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(value) == "" {
			continue
		}
		if extra[name] || credentialName.MatchString(name) {
			r.secrets = append(r.secrets, value)
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// String redacts one string.
func (r *Redactor) String(s string) string {
	s = urlUserinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
	s = bearer.ReplaceAllString(s, "${1}"+Redacted)
	s = secretQuery.ReplaceAllString(s, "${1}"+Redacted)
	for _, sec := range r.secrets {
		s = replaceSecret(s, sec)
	}
	return s
}

// replaceSecret hides sec in s. Short secrets (under four characters) are
// replaced only as whole words, so a secret "ab" does not mangle "table".
func replaceSecret(s, sec string) string {
	if len(sec) >= 4 {
		return strings.ReplaceAll(s, sec, Redacted)
	}
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(sec) + `\b`)
	return re.ReplaceAllString(s, Redacted)
}

// Value redacts every string inside a generic JSON value (maps, slices,
// strings). Schema names and hex digests under *sha256/*digest/*fingerprint
// keys are left alone: they are identities, not secrets.
func (r *Redactor) Value(v any) any {
	return r.value("", v)
}

func (r *Redactor) value(key string, v any) any {
	switch t := v.(type) {
	case string:
		if key == "schema" && knownSchema.MatchString(t) {
			return t
		}
		lk := strings.ToLower(key)
		if (strings.HasSuffix(lk, "sha256") || strings.HasSuffix(lk, "digest") || strings.HasSuffix(lk, "fingerprint")) && hexDigest.MatchString(t) {
			return t
		}
		return r.String(t)
	case map[string]any:
		for k, e := range t {
			t[k] = r.value(k, e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = r.value(key, e)
		}
		return t
	default:
		return v
	}
}
