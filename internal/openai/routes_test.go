package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestNotRouted(t *testing.T) {
	known := http.NewServeMux()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	known.Handle("POST /v1/completions", ok)
	known.Handle("GET /v1/models", ok)
	for _, tc := range []struct {
		method, path string
		status       int
		allow, code  string
	}{
		{"GET", "/v1/completions", 405, "POST", "method_not_allowed"},
		{"DELETE", "/v1/models", 405, "GET, HEAD", "method_not_allowed"},
		{"GET", "/v2/nothing", 404, "", "not_found"},
	} {
		w := httptest.NewRecorder()
		NotRouted(w, httptest.NewRequest(tc.method, tc.path, nil), known)
		var body struct {
			Error struct {
				Type string  `json:"type"`
				Code *string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != tc.status || w.Header().Get("Allow") != tc.allow || body.Error.Type != TypeInvalid ||
			body.Error.Code == nil || *body.Error.Code != tc.code {
			t.Errorf("%s %s: %d Allow %q %s, want %d Allow %q code %s", tc.method, tc.path, w.Code, w.Header().Get("Allow"),
				w.Body.Bytes(), tc.status, tc.allow, tc.code)
		}
	}
}
