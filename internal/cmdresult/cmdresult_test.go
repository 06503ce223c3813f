package cmdresult

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestStatusExitCodes(t *testing.T) {
	for s, want := range map[Status]int{Success: 0, FailedGate: 1, InvalidInput: 2, Degraded: 3, Error: 4, Interrupted: 130} {
		if got := s.ExitCode(); got != want {
			t.Errorf("%s.ExitCode() = %d, want %d", s, got, want)
		}
	}
}

func TestWriteEnvelope(t *testing.T) {
	var buf bytes.Buffer
	r := Result{Command: "narwhal", Operation: "config validate", Status: InvalidInput,
		Data:   struct{ Z, A int }{1, 2},
		Errors: []Problem{{Code: "invalid_input", Message: "bad <thing>", Command: "narwhal", Field: "x.y"}}}
	if err := r.Write(&buf, nil); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Errorf("want exactly one line, got %q", out)
	}
	if !strings.Contains(out, `"data":{"A":2,"Z":1}`) || !strings.Contains(out, "<thing>") {
		t.Errorf("keys not sorted or HTML escaped: %s", out)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["exit_code"] != 2.0 || m["schema"] != Schema || m["schema_version"] != 1.0 {
		t.Errorf("envelope = %v", m)
	}
	if arts, ok := m["artifacts"].([]any); !ok || len(arts) != 0 {
		t.Errorf("artifacts = %v, want []", m["artifacts"])
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{"API_TOKEN=tok-123456", "HOME=/root", "ENGINE_CRED=abc", "PLAIN=visible-value"}, "ENGINE_CRED")
	cases := map[string]string{
		"token tok-123456 here":                    "token [REDACTED] here",
		"http://user:pw@host:1/x":                  "http://[REDACTED]@host:1/x",
		"Authorization: Bearer xyz.abc":            "Authorization: Bearer [REDACTED]",
		"https://h/p?api_key=k1&x=1&token=t2":      "https://h/p?api_key=[REDACTED]&x=1&token=[REDACTED]",
		"short secret abc alone, not in abcdef":    "short secret [REDACTED] alone, not in abcdef",
		"/root stays; visible-value stays visible": "/root stays; visible-value stays visible",
	}
	for in, want := range cases {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	v := r.Value(map[string]any{
		"schema":             "narwhal.fleet",
		"image_digest":       "sha256:" + strings.Repeat("ab", 32),
		"nested":             []any{"tok-123456"},
		"attestation_digest": "1220" + strings.Repeat("0", 64),
	}).(map[string]any)
	if v["nested"].([]any)[0] != Redacted {
		t.Errorf("nested secret not redacted: %v", v)
	}
	if v["schema"] != "narwhal.fleet" || !strings.HasPrefix(v["image_digest"].(string), "sha256:abab") {
		t.Errorf("identities were redacted: %v", v)
	}
}
