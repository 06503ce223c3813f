package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/sim"
)

func TestParseDist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Dist
		err  string
	}{
		{"128", Dist{Mean: 128, Max: 128}, ""},
		{"lognormal:100:0.5", Dist{Mean: 100, Spread: 0.5, Max: 800}, ""},
		{"lognormal:100:0.5:300", Dist{Mean: 100, Spread: 0.5, Max: 300}, ""},
		{"0", Dist{}, "positive"},
		{"lognormal:0.5:1", Dist{}, "MEAN ≥ 1"},
		{"normal:1:2", Dist{}, "use N or lognormal"},
	} {
		got, err := ParseDist(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Fatalf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// A sweep's steps follow each other; every offer sits in its step's
// window and the same seed gives the same schedule.
func TestPoissonSweepSchedule(t *testing.T) {
	d := Dist{Mean: 16, Max: 16}
	a, err := Poisson([]float64{10, 40}, 2, d, d, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Poisson([]float64{10, 40}, 2, d, d, 7)
	if a.Source != "sweep" || len(a.Steps) != 2 || a.Steps[1].StartS != 2 || a.DurationS() != 4 {
		t.Fatalf("steps %+v", a.Steps)
	}
	if a.Steps[0].Offered+a.Steps[1].Offered != len(a.Offers) || a.Steps[1].Offered < 2*a.Steps[0].Offered {
		t.Fatalf("offers per step %d, %d of %d", a.Steps[0].Offered, a.Steps[1].Offered, len(a.Offers))
	}
	for i, o := range a.Offers {
		st := a.Steps[o.Step]
		if o.At < st.StartS || o.At >= st.StartS+st.DurationS || o.InputLen != 16 || o != b.Offers[i] {
			t.Fatalf("offer %d %+v outside step %+v or not reproducible", i, o, st)
		}
	}
	if _, err := Poisson([]float64{1e9}, 10, d, d, 1); err == nil {
		t.Fatal("a schedule over MaxOffers must be refused")
	}
}

// fakeRouter answers by the requested length: 1 → 429 with a code, 2 →
// a stream cut before [DONE], 3 → a 503 without a JSON body, else the
// full stream. slow delays every stream's first token.
func fakeRouter(t *testing.T, slow time.Duration) (*httptest.Server, *atomic.Int64) {
	var got atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
	})
	mux.HandleFunc("GET /narwhal/state", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"slo":{"ttft_s":1,"tpot_s":0.05}}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		var body completionBody
		json.NewDecoder(r.Body).Decode(&body)
		if body.Model != "m" || !body.Stream || body.MinTokens != body.MaxTokens || r.Header.Get("X-Request-Id") == "" {
			t.Errorf("request %+v, id %q", body, r.Header.Get("X-Request-Id"))
		}
		w.Header().Set("X-Narwhal-Request-Id", "router-"+r.Header.Get("X-Request-Id"))
		switch body.MaxTokens {
		case 1:
			w.WriteHeader(429)
			fmt.Fprint(w, `{"error":{"message":"over SLO","type":"rate_limit_error","param":null,"code":"slo_refused"}}`)
			return
		case 3:
			w.WriteHeader(503)
			return
		}
		time.Sleep(slow)
		n := body.MaxTokens
		if n == 2 {
			n = 1
		}
		for i := range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\",\"finish_reason\":null}]}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
		if body.MaxTokens == 2 {
			return
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", n)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &got
}

func schedule(lens ...int) Schedule {
	s := Schedule{Source: "trace", Steps: []Step{{Rate: 1, DurationS: 0.05, Offered: len(lens)}}}
	for i, n := range lens {
		s.Offers = append(s.Offers, Offer{At: float64(i) * 0.01, InputLen: 4, OutputLen: n})
	}
	return s
}

func TestRunRecordsOutcomesFromTheClientSide(t *testing.T) {
	srv, _ := fakeRouter(t, 0)
	var out, bar bytes.Buffer
	g, err := New(Config{Router: srv.URL + "/", Schedule: schedule(5, 1, 2, 3), Out: &out, Progress: &bar})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[int]Record{}
	for _, r := range recs {
		by[r.WantedLen] = r
	}
	ok := by[5]
	if ok.Outcome != OutcomeCompleted || ok.OutputLen != 5 || ok.TTFT == nil || ok.TPOT == nil || *ok.TPOT < 0.0015 ||
		ok.RouterRID != "router-"+ok.ID || *ok.E2E < *ok.TTFT {
		t.Fatalf("completed record %+v", ok)
	}
	if r := by[1]; r.Outcome != OutcomeHTTPError || r.Refusal() != "429 slo_refused" || r.ErrorType != "rate_limit_error" {
		t.Fatalf("refusal %+v (%s)", r, r.Refusal())
	}
	if r := by[2]; r.Outcome != OutcomeInvalidStream || r.TTFT == nil {
		t.Fatalf("cut stream %+v", r)
	}
	if r := by[3]; r.Refusal() != "503" {
		t.Fatalf("503 %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var h Header
	if len(lines) != 5 || json.Unmarshal([]byte(lines[0]), &h) != nil || h.Schema != Schema || h.SLO == nil || h.SLO.TPOT != 0.05 || h.Model != "m" {
		t.Fatalf("results file:\n%s", out.String())
	}
	if !strings.Contains(bar.String(), "4/4 done") {
		t.Fatalf("progress %q", bar.String())
	}
}

// Open loop: with the limit full, a due offer is recorded, not sent or
// delayed; offers the time bound leaves unsent are recorded too.
func TestRunIsBoundedAndOpenLoop(t *testing.T) {
	srv, got := fakeRouter(t, 300*time.Millisecond)
	s := schedule(4, 4, 4)
	s.Offers = append(s.Offers, Offer{At: 5, OutputLen: 4, InputLen: 4}) // past the bound
	s.Steps[0].DurationS = 0.05
	var out bytes.Buffer
	g, err := New(Config{Router: srv.URL, Schedule: s, Limit: 1, Out: &out, RequestTimeout: time.Second, DrainTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	recs, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("run took %v; its bound is the offer window plus the drain timeout", el)
	}
	n := map[string]int{}
	for _, r := range recs {
		n[r.Outcome]++
	}
	if len(recs) != 4 || n[OutcomeClientLimit] != 2 || n[OutcomeNotSent] != 1 || got.Load() != 1 {
		t.Fatalf("outcomes %v (%d records), %d sent; want 1 sent, 2 client_limit, 1 not_sent", n, len(recs), got.Load())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{Router: "127.0.0.1:8000", Schedule: schedule(1)}); err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Config{Router: "http://x"}); err == nil || !strings.Contains(err.Error(), "no request") {
		t.Fatalf("err %v", err)
	}
}

func TestPromptLength(t *testing.T) {
	if p := Prompt("abc", 5); p != "abc tok tok tok tok" {
		t.Fatalf("prompt %q", p)
	}
}

// A trace replays on its own clock, or once per rate with its clock
// rescaled, as narwhal demo --trace rescales it.
func TestReplaySchedule(t *testing.T) {
	tr := sim.Trace{DurationS: 4, Arrivals: []sim.Arrival{{At: 0, InputLen: 5, OutputLen: 6}, {At: 1, InputLen: 7, OutputLen: 8}, {At: 3, InputLen: 1, OutputLen: 2}}}
	own, err := Replay(tr, nil)
	if err != nil || len(own.Steps) != 1 || own.Steps[0].Rate != 0.75 || own.Offers[1] != (Offer{At: 1, InputLen: 7, OutputLen: 8}) {
		t.Fatalf("own clock: %+v, %v", own, err)
	}
	swept, err := Replay(tr, []float64{1.5, 0.75})
	if err != nil || swept.Source != "trace" || len(swept.Offers) != 6 || swept.Steps[0].DurationS != 2 || swept.Steps[1].StartS != 2 {
		t.Fatalf("sweep: %+v, %v", swept.Steps, err)
	}
	if o := swept.Offers[2]; o.At != 1.5 || o.Step != 0 {
		t.Fatalf("offer at 3 s of the trace, at twice its rate: %+v", o)
	}
	if o := swept.Offers[4]; o.At != 3 || o.Step != 1 {
		t.Fatalf("second step's offer at 1 s, starting at 2 s: %+v", o)
	}
}
