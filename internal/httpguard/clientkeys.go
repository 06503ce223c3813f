package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/openai"
)

// ClientKeys are the API keys clients send as Authorization: Bearer KEY
// on /v1/*, as vLLM's --api-key: several keys are accepted at once so a
// key can be rotated without a window where clients fail. Only SHA-256
// digests are held, and every digest is compared in constant time
// (crypto/subtle), so neither a key's length nor how many of its bytes
// match shows in the time an answer takes. vLLM does the same (hashlib +
// secrets.compare_digest over every token, scheme matched
// case-insensitively):
// https://github.com/vllm-project/vllm/blob/baaf6e9c171b38e155d4191ac29f3a4a08817146/vllm/entrypoints/serve/middleware/authenticate.py
type ClientKeys struct {
	digests [][sha256.Size]byte
}

// NewClientKeys holds the digests of keys; empty keys are ignored (the
// command refuses them before this).
func NewClientKeys(keys []string) ClientKeys {
	var k ClientKeys
	for _, key := range keys {
		if key != "" {
			k.digests = append(k.digests, sha256.Sum256([]byte(key)))
		}
	}
	return k
}

// Enabled reports whether any key is configured; without one every
// request passes (authentication is then the ingress's job).
func (k ClientKeys) Enabled() bool { return len(k.digests) > 0 }

// Authorized reports whether the Authorization header value carries one
// of the keys under the Bearer scheme (any case, as RFC 9110 makes
// schemes case-insensitive).
func (k ClientKeys) Authorized(header string) bool {
	token, ok := BearerToken(header)
	if !ok {
		return false
	}
	d := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range k.digests {
		match |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return match == 1
}

// BearerToken is the credential of an Authorization header value under
// the Bearer scheme, matched in any case (RFC 9110 §11.1: the scheme is
// case-insensitive); false for any other scheme or an empty token.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// KeyRefusal is the 401 for a request without a valid key, or nil. It
// never repeats what the client sent. OpenAI's SDKs do not retry a 401
// (shouldRetry retries only 408, 409, 429 and 5xx):
// https://github.com/openai/openai-node/blob/e3a0a9c8b01d0e38e96bfee10ff539aa282db4ed/src/client.ts
func (k ClientKeys) KeyRefusal(req *http.Request) *openai.Error {
	if !k.Enabled() {
		return nil
	}
	h := req.Header.Get("Authorization")
	if k.Authorized(h) {
		return nil
	}
	msg := "invalid API key: send -H 'Authorization: Bearer KEY' with a current key (the value of a variable narwhal-serve's --api-key-env names)"
	if h == "" {
		msg = "missing API key: send -H 'Authorization: Bearer KEY' (the value of a variable narwhal-serve's --api-key-env names)"
	}
	return openai.Invalid(http.StatusUnauthorized, "invalid_api_key", msg)
}
