package vllm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/simengine"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"see http://10.0.0.7:8000/docs for details", "see <url> for details"},
		{"engine at 10.0.0.7:8000 refused", "engine at <host> refused"},
		{"engine at 10.0.0.7 refused", "engine at <host> refused"},
		{"engine gpu-7.internal:8000 refused", "engine <host> refused"},
		{"engine [fe80::1]:8000 refused", "engine <host> refused"},
		{"Authorization: Bearer sk-abcdef123456", "Authorization: Bearer <redacted>"},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic <redacted>"},
		{"password: hunter22, retry", "password: <redacted>, retry"},
		{"a basic validation failed", "a basic validation failed"},
		{"api_key=abc123 is wrong", "api_key=<redacted> is wrong"},
		{"key sk-proj-abcdefgh leaked", "key <redacted> leaked"},
		{"max_tokens must be at least 1, got 0.", "max_tokens must be at least 1, got 0."},
		{"This model's maximum context length is 4096 tokens (12 > 4096 - 5).", "This model's maximum context length is 4096 tokens (12 > 4096 - 5)."},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Sanitize(strings.Repeat("x", 2000)); len(got) > maxClientMessage+len("…") {
		t.Errorf("a long message is not bounded: %d bytes", len(got))
	}
}

func TestClientDetailShapes(t *testing.T) {
	for _, tc := range []struct{ body, msg, param string }{
		{`{"error":{"message":"bad stop","type":"BadRequestError","param":"stop","code":400}}`, "bad stop", "stop"},
		{`{"object":"error","message":"bad n","type":"BadRequestError","param":null,"code":400}`, "bad n", ""},
		{`{"detail":"Not a JSON body"}`, "Not a JSON body", ""},
		{`{"detail":[{"loc":["body","temperature"],"msg":"must be <= 2","type":"value_error"}]}`, "body.temperature: must be <= 2", ""},
		{"plain text from http://host:9/x", "plain text from <url>", ""},
	} {
		msg, param := clientDetail(tc.body)
		if msg != tc.msg || param != tc.param {
			t.Errorf("clientDetail(%s) = %q, %q; want %q, %q", tc.body, msg, param, tc.msg, tc.param)
		}
	}
}

func TestClientFault(t *testing.T) {
	for status, want := range map[int]bool{400: true, 413: true, 422: true, 401: false, 403: false, 404: false, 408: false, 429: false, 500: false} {
		if got := statusError("prefill", status, `{"error":{"message":"m"}}`).ClientFault(); got != want {
			t.Errorf("HTTP %d: ClientFault %v, want %v", status, got, want)
		}
	}
}

// The engine's own address and key never reach what a client may see.
func TestRedactRemovesTheEnginesAddressAndKey(t *testing.T) {
	e := statusError("prefill", 400, `{"error":{"message":"engine engine-host refused key verysecretkey","param":"p"}}`)
	redact(e, "http://engine-host", "verysecretkey")
	if strings.Contains(e.ClientMessage, "engine-host") || strings.Contains(e.ClientMessage, "verysecretkey") {
		t.Errorf("ClientMessage %q", e.ClientMessage)
	}
}

func TestModelCardsReportMaxModelLen(t *testing.T) {
	fl, err := simengine.StartFleet(1, simengine.Config{Model: "m", MaxModelLen: 2048, Profile: simengine.DefaultProfile("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	c := NewClient(fl.URLs()[0], Options{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cards, e := c.ModelCards(ctx)
	if e != nil || len(cards) != 1 || cards[0].ID != "m" || cards[0].MaxModelLen != 2048 {
		t.Fatalf("ModelCards = %+v, %v", cards, e)
	}
}
