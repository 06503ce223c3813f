package fleet

import (
	"strings"
	"testing"
)

// serving.cors_origins takes origins exactly as a browser sends them in
// Origin, and says how to write one it refuses.
func TestCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   any
		problem string // "" when the document is valid
	}{
		{"absent is empty", nil, ""},
		{"one https origin", []any{"https://app.example.com"}, ""},
		{"http with a port", []any{"http://127.0.0.1:5173"}, ""},
		{"a trailing slash", []any{"https://app.example.com/"}, "e.g. https://app.example.com, got 'https://app.example.com/'"},
		{"a path", []any{"https://app.example.com/chat"}, "no path"},
		{"the default port", []any{"https://app.example.com:443"}, "e.g. https://app.example.com,"},
		{"upper case host", []any{"https://App.example.com"}, "e.g. https://app.example.com,"},
		{"a wildcard", []any{"*"}, "serving.cors_origins[0] is '*'"},
		{"not a URL", []any{"app.example.com"}, "serving.cors_origins[0] must be an origin"},
		{"the second entry", []any{"https://a.example", "ftp://b.example"}, "serving.cors_origins[1]"},
		{"a string, not a list", "https://app.example.com", "serving.cors_origins must be a list of strings"},
		{"a number in the list", []any{1}, "serving.cors_origins must be a list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := exampleDoc(t)
			if tc.value != nil {
				doc["serving"].(map[string]any)["cors_origins"] = tc.value
			}
			cfg, err := Parse("test", encode(t, doc), env(nil))
			switch {
			case tc.problem == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Fatalf("error %v, want one containing %q", err, tc.problem)
			case tc.problem == "" && tc.value != nil && len(cfg.Serving.CORSOrigins) != len(tc.value.([]any)):
				t.Fatalf("read %v from %v", cfg.Serving.CORSOrigins, tc.value)
			}
		})
	}
}
