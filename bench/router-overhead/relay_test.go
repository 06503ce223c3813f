package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/simengine"
)

// The relay runs the two legs on real simulated engines: the client gets
// the decode engine's stream to [DONE] with the requested tokens, and a
// wrong route is refused.
func TestRelayServesTwoLegs(t *testing.T) {
	fl, err := simengine.StartFleet(2, simengine.Config{Model: "bench", Profile: benchProfile("x", 0.0001, 0.0005)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	rl := &relay{hc: &http.Client{}, prefill: fl.URLs()[0], decode: fl.URLs()[1]}
	srv := httptest.NewServer(rl)
	defer srv.Close()
	ttfb, err := stream(srv.Client(), srv.URL, body(4, nil))
	if err != nil || ttfb <= 0 {
		t.Fatalf("stream through the relay: ttfb %v, %v", ttfb, err)
	}
	if fl.Engines[0].Connections() == 0 || fl.Engines[1].Connections() == 0 {
		t.Errorf("connections: prefill engine %d, decode engine %d; want both legs run", fl.Engines[0].Connections(), fl.Engines[1].Connections())
	}
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("chat route: %d, want 404", resp.StatusCode)
	}
}
