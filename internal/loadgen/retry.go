package loadgen

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Retries as OpenAI's SDKs make them, so a bench run offers what SDK users
// offer and counts the HTTP attempts per call. The rules are openai-node
// 6.30.1's (client.js shouldRetry, retryRequest,
// calculateDefaultRetryTimeoutMillis): x-should-retry decides when present;
// else 408, 409, 429 and 5xx are retried, as is a connection error; the
// wait is retry-after-ms, else Retry-After seconds, else 0.5 s × 2^n capped
// at 8 s, less up to 25 % jitter. DefaultMaxRetries is the SDKs' default.
const DefaultMaxRetries = 2

// shouldRetry reports whether the SDK would retry a response of status
// with these headers.
func shouldRetry(status int, h http.Header) bool {
	switch h.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// retryWait is how long the SDK waits before retry n (0-based) of a
// response with headers h (nil for a connection error).
func retryWait(h http.Header, n int, rng *rand.Rand) time.Duration {
	if h != nil {
		if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil {
			return time.Duration(ms * float64(time.Millisecond))
		}
		if s, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil {
			return time.Duration(s * float64(time.Second))
		}
	}
	secs := math.Min(0.5*math.Pow(2, float64(n)), 8) * (1 - 0.25*rng.Float64())
	return time.Duration(secs * float64(time.Second))
}
