package openai

import (
	"net/http/httptest"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// Every constructor sends OpenAI's shape with all four keys present, its
// status and type, and Retry-After only where a retry can succeed.
func TestErrorWrite(t *testing.T) {
	for _, tc := range []struct {
		name       string
		e          *Error
		status     int
		retryAfter string
		body       string
	}{
		{"bad request", InvalidType("max_tokens", "max_tokens must be an integer"), 400, "",
			`{"error":{"message":"max_tokens must be an integer","type":"invalid_request_error","param":"max_tokens","code":"invalid_type"}}`},
		{"no field", BadRequest("invalid_json", "", "a <b> & c"), 400, "",
			`{"error":{"message":"a <b> & c","type":"invalid_request_error","param":null,"code":"invalid_json"}}`},
		{"invalid", Invalid(413, "request_too_large", "too big"), 413, "",
			`{"error":{"message":"too big","type":"invalid_request_error","param":null,"code":"request_too_large"}}`},
		{"model", ModelNotFound("x", "m"), 404, "",
			"{\"error\":{\"message\":\"The model `x` does not exist; this router serves `m`.\",\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}"},
		{"overloaded at least 1s", Overloaded("saturated", "busy", 0), 429, "1",
			`{"error":{"message":"busy","type":"rate_limit_error","param":null,"code":"saturated"}}`},
		{"overloaded", Overloaded("queue", "deep", 7), 429, "7",
			`{"error":{"message":"deep","type":"rate_limit_error","param":null,"code":"queue"}}`},
		{"unavailable", Unavailable("standby", "not the leader"), 503, "1",
			`{"error":{"message":"not the leader","type":"service_unavailable_error","param":null,"code":"standby"}}`},
		{"upstream", Upstream("prefill", false), 502, "",
			`{"error":{"message":"Upstream request failed","type":"server_error","param":null,"code":"prefill"}}`},
		{"upstream timeout", Upstream("decode", true), 504, "",
			`{"error":{"message":"Upstream request failed","type":"server_error","param":null,"code":"decode"}}`},
		{"engine refusal", LegError("prefill", &fault.Error{Reason: fault.EngineRejected, Status: 422, ClientMessage: "bad logit_bias", ClientParam: "logit_bias"}), 422, "",
			`{"error":{"message":"bad logit_bias","type":"invalid_request_error","param":"logit_bias","code":"engine_rejected"}}`},
		{"engine refusal without a message", LegError("prefill", &fault.Error{Reason: fault.EngineRejected, Status: 400}), 400, "",
			`{"error":{"message":"the engine refused the request as invalid","type":"invalid_request_error","param":null,"code":"engine_rejected"}}`},
		{"engine fault", LegError("decode", &fault.Error{Reason: fault.EngineRejected, Status: 500}), 502, "",
			`{"error":{"message":"Upstream request failed","type":"server_error","param":null,"code":"decode"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.e.Write(w)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retryAfter || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d Retry-After %q Content-Type %q, want %d %q application/json",
					w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), tc.status, tc.retryAfter)
			}
			if got := w.Body.String(); got != tc.body+"\n" {
				t.Errorf("body\n got %s\nwant %s", got, tc.body)
			}
		})
	}
}

// A stream that already sent output ends with the error as its last
// event: the same JSON as the body, without the newline.
func TestErrorEvent(t *testing.T) {
	for _, code := range []string{"expired", "failed"} {
		want := `{"error":{"message":"Upstream request failed","type":"server_error","param":null,"code":"` + code + `"}}`
		if got := string(Upstream(code, false).Event()); got != want {
			t.Errorf("event\n got %s\nwant %s", got, want)
		}
	}
}
