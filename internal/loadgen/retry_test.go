package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestShouldRetryAsTheSDKs(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string
		want   bool
	}{
		{429, "", true}, {503, "", true}, {500, "", true}, {408, "", true}, {409, "", true},
		{400, "", false}, {401, "", false}, {404, "", false}, {415, "", false},
		{502, "false", false}, {429, "false", false}, {400, "true", true},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("X-Should-Retry", tc.header)
		}
		if got := shouldRetry(tc.status, h); got != tc.want {
			t.Errorf("%d x-should-retry %q: retry %v, want %v", tc.status, tc.header, got, tc.want)
		}
	}
}

func TestRetryWait(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := http.Header{}
	h.Set("Retry-After", "3")
	if got := retryWait(h, 0, rng); got != 3*time.Second {
		t.Errorf("Retry-After 3: %v", got)
	}
	h.Set("Retry-After-Ms", "250")
	if got := retryWait(h, 0, rng); got != 250*time.Millisecond {
		t.Errorf("retry-after-ms 250 first: %v", got)
	}
	for n, hi := range []float64{0.5, 1, 2, 4, 8, 8} {
		got := retryWait(nil, n, rng).Seconds()
		if got > hi || got < 0.75*hi {
			t.Errorf("default wait %d: %.3f s, want in [%.3f, %.3f]", n, got, 0.75*hi, hi)
		}
	}
}

// The client retries what an SDK would, waits as told, and counts every
// HTTP attempt of a call.
func TestRunRetriesAsTheSDKs(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{} // max_tokens → attempts seen
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":"m"}]}`) })
	mux.HandleFunc("GET /narwhal/state", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"slo":{"ttft_s":1,"tpot_s":0.05}}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body completionBody
		json.Unmarshal(b, &body)
		mu.Lock()
		seen[body.MaxTokens]++
		k := seen[body.MaxTokens]
		mu.Unlock()
		switch {
		case body.MaxTokens == 6 && k == 1: // refused once, then served
			w.Header().Set("X-Should-Retry", "true")
			w.Header().Set("Retry-After-Ms", "5")
			w.WriteHeader(429)
			return
		case body.MaxTokens == 7: // the router already retried
			w.Header().Set("X-Should-Retry", "false")
			w.WriteHeader(502)
			return
		case body.MaxTokens == 8: // no advice: retried by status
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(503)
			return
		case body.MaxTokens == 9:
			w.WriteHeader(400)
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"t\",\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	g, err := New(Config{Router: srv.URL, Schedule: schedule(6, 7, 8, 9), Out: io.Discard, MaxRetries: DefaultMaxRetries})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]struct {
		attempts int
		outcome  string
	}{6: {2, OutcomeHTTPError}, 7: {1, OutcomeHTTPError}, 8: {3, OutcomeHTTPError}, 9: {1, OutcomeHTTPError}}
	for _, r := range recs {
		w := want[r.WantedLen]
		if r.Attempts != w.attempts || seen[r.WantedLen] != w.attempts {
			t.Errorf("max_tokens %d: %d attempts recorded, %d seen, want %d", r.WantedLen, r.Attempts, seen[r.WantedLen], w.attempts)
		}
		if r.WantedLen != 6 && r.Outcome != w.outcome {
			t.Errorf("max_tokens %d: outcome %s", r.WantedLen, r.Outcome)
		}
		if r.WantedLen == 6 && r.Status != 200 {
			t.Errorf("the retried call ended %d %s, want served", r.Status, r.Outcome)
		}
	}
}
