package vllm

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// clientDetail extracts the message and param of an engine's error body,
// sanitized. vLLM answers {"error":{"message","type","param","code"}}
// (older releases: the same fields at the top level, "object":"error");
// FastAPI's own validation answers {"detail": "…"} or {"detail": [{"loc",
// "msg"}]}. Anything else is taken as text.
func clientDetail(body string) (msg, param string) {
	type fields struct {
		Message string          `json:"message"`
		Param   json.RawMessage `json:"param"`
	}
	var b struct {
		fields
		Error  *fields         `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	raw := strings.TrimSpace(body)
	if json.Unmarshal([]byte(raw), &b) != nil {
		return Sanitize(raw), ""
	}
	f := b.fields
	if b.Error != nil {
		f = *b.Error
	}
	msg = f.Message
	if msg == "" {
		msg = fastAPIDetail(b.Detail)
	}
	var p string
	if json.Unmarshal(f.Param, &p) == nil {
		param = Sanitize(p)
	}
	return Sanitize(msg), param
}

// fastAPIDetail renders FastAPI's detail: a string, or a list of
// {"loc": [...], "msg": "..."} joined as "loc: msg; …".
func fastAPIDetail(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		var loc []string
		for _, l := range it.Loc {
			b, _ := json.Marshal(l)
			loc = append(loc, strings.Trim(string(b), `"`))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
	}
	return strings.Join(parts, "; ")
}

// What an engine message must not carry to a client: where the engine
// lives and any credential.
var (
	urlPattern      = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>()\[\]]+`)
	ipv6Pattern     = regexp.MustCompile(`\[[0-9A-Fa-f:.%]+\](?::\d+)?`)
	ipv4Pattern     = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b`)
	hostPortPattern = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*:\d{2,5}\b`)
	bearerPattern   = regexp.MustCompile(`(?i)\b(bearer|authorization["']?\s*[:=]\s*["']?basic)\s+[^\s"',;)<]+`)
	secretPattern   = regexp.MustCompile(`(?i)\b(api[_-]?key|token|password|secret)(["']?\s*[:=]\s*["']?)[^\s"',;)]+`)
	skKeyPattern    = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{6,}`)
)

// maxClientMessage bounds a sanitized message, in bytes.
const maxClientMessage = 500

// Sanitize removes URLs, IP addresses, host:port pairs and credentials
// from an engine's message, so it can be shown to a client, and bounds
// its length.
func Sanitize(s string) string {
	s = urlPattern.ReplaceAllString(s, "<url>")
	s = bearerPattern.ReplaceAllString(s, "${1} <redacted>")
	s = secretPattern.ReplaceAllString(s, "${1}${2}<redacted>")
	s = skKeyPattern.ReplaceAllString(s, "<redacted>")
	s = ipv6Pattern.ReplaceAllString(s, "<host>")
	s = ipv4Pattern.ReplaceAllString(s, "<host>")
	s = hostPortPattern.ReplaceAllString(s, "<host>")
	return truncate(s, maxClientMessage)
}

// redact removes this engine's own address and key from what a client
// may see of e, which the patterns alone might miss (a bare host name, a
// key without a prefix).
func redact(err error, base, key string) {
	if err == nil {
		return
	}
	e := fault.As(err)
	if e == nil || (e.ClientMessage == "" && e.ClientParam == "") {
		return
	}
	for _, secret := range []string{key, strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")} {
		if len(secret) >= 4 {
			e.ClientMessage = strings.ReplaceAll(e.ClientMessage, secret, "<redacted>")
			e.ClientParam = strings.ReplaceAll(e.ClientParam, secret, "<redacted>")
		}
	}
}
