package vllm

import "context"

// traceKey carries the W3C traceparent a leg sends to its engine.
type traceKey struct{}

// WithTraceparent returns ctx whose engine requests carry traceparent
// (W3C Trace Context, "00-<trace id>-<span id>-<flags>"); vLLM started with
// --otlp-traces-endpoint parents its own spans on it. The value is the
// caller's to form (internal/tracing); "" sends none.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceparent)
}

// traceparent is the value WithTraceparent put in ctx, or "".
func traceparent(ctx context.Context) string {
	v, _ := ctx.Value(traceKey{}).(string)
	return v
}
