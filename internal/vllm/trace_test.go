package vllm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Both legs carry the traceparent their context names, and none without.
func TestLegsCarryTraceparent(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		http.Error(w, "no", http.StatusTeapot) // the header is all this test reads
	}))
	defer srv.Close()
	c := NewClient(srv.URL, Options{})
	defer c.Close()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithTraceparent(context.Background(), tp)
	c.Prefill(ctx, "/v1/completions", []byte(`{}`), "r1")
	if s, e := c.OpenStream(ctx, "/v1/completions", []byte(`{}`), "r1"); e == nil {
		s.Close()
	}
	c.Prefill(context.Background(), "/v1/completions", []byte(`{}`), "r2")
	for i, want := range []string{tp, tp, ""} {
		if h := <-got; h != want {
			t.Errorf("request %d: traceparent %q, want %q", i, h, want)
		}
	}
}
