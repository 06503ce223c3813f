package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// fakeStream serves POST /v1/completions as a decode stream shaped by
// mode: ok (16 tokens), short (3 then [DONE]), cut (3 then the connection
// ends), silent (nothing), gap (1 token, then nothing). Silence lasts
// until the client goes away (at most 5 s).
func fakeStream(t *testing.T, mode string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		tokens := map[string]int{"ok": 16, "short": 3, "cut": 3, "gap": 1}[mode]
		for i := range tokens {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d \",\"token_ids\":[%d]}]}\n\n", i, i)
		}
		w.(http.Flusher).Flush()
		switch mode {
		case "ok", "short":
			fmt.Fprint(w, "data: [DONE]\n\n")
		case "silent", "gap":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// streamProber probes a one-engine fleet of fakeStream(mode) with 0.2 s
// bounds before the first token and between tokens.
func streamProber(t *testing.T, mode string) *probe.Prober {
	cfg := fleetOf(t, []string{fakeStream(t, mode)}, []string{""}, `"health_timeout_s":0.2,"first_token_timeout_s":0.1,"decode_read_timeout_s":0.2`)
	return newProber(t, cfg, probe.Options{})
}

// TestReadStream: the decode-stream reader's results and bounds.
func TestReadStream(t *testing.T) {
	tests := []struct {
		mode       string
		tokens     int
		text       string
		err        string // substring of the error's Msg; "" for none
		firstToken bool   // the error is the first-token bound
	}{
		{"ok", 16, "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 t10 t11 t12 t13 t14 t15 ", "", false},
		{"cut", 3, "t0 t1 t2 ", "stream ended before the [DONE] terminator", false},
		{"silent", 0, "", "engine went silent between tokens", true},
		{"gap", 1, "t0 ", "engine went silent between tokens", false},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			p := streamProber(t, tc.mode)
			opened := time.Now()
			s, e := p.Client("e0").OpenStream(context.Background(), "/v1/completions", []byte(`{"prompt":"probe"}`), "")
			if e != nil {
				t.Fatal(e)
			}
			defer s.Close()
			d, e := p.ReadStream(s, opened)
			if d.Tokens != tc.tokens || d.Text != tc.text {
				t.Errorf("read %d tokens %q, want %d %q", d.Tokens, d.Text, tc.tokens, tc.text)
			}
			if (tc.err == "") != (e == nil) || (e != nil && !strings.Contains(fault.As(e).Msg, tc.err)) {
				t.Fatalf("error %v, want %q", e, tc.err)
			}
			if d.FirstTokenExpired(e) != tc.firstToken {
				t.Errorf("FirstTokenExpired = %v, want %v", d.FirstTokenExpired(e), tc.firstToken)
			}
			if (d.Tokens > 0) != (d.FirstToken > 0) {
				t.Errorf("first token after %v with %d tokens", d.FirstToken, d.Tokens)
			}
		})
	}
}

// TestStream: the probe an engine ejected for cutting streams must pass
// (with it the router's TestMidStreamCutsEjectAtTheBreakerThreshold
// keeps a cutting engine out).
func TestStream(t *testing.T) {
	tests := []struct {
		mode    string
		class   fault.Class // "" passes; "timeout" is any timeout-shaped failure
		message string
	}{
		{"ok", "", ""},
		{"short", "output_cut", "stream probe ended after 3 of 16 tokens"},
		{"cut", "stream", "stream ended before the [DONE] terminator"},
		// The probe's bound and the reader's first-token bound are the
		// same length: whichever fires, the failure is a timeout.
		{"silent", "timeout", ""},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			e := streamProber(t, tc.mode).Stream(context.Background(), "e0", 16)
			if tc.class == "" {
				if e != nil {
					t.Fatalf("Stream = %v, want nil", e)
				}
				return
			}
			if tc.class == "timeout" && e != nil && fault.As(e).Timeout {
				return
			}
			if e == nil || fault.As(e).Class != tc.class || !strings.Contains(fault.As(e).Msg, tc.message) {
				t.Fatalf("Stream = %+v, want class %s with %q", e, tc.class, tc.message)
			}
		})
	}
}

// TestInference: two tokens directly; a failing engine fails it.
func TestInference(t *testing.T) {
	f := startFleet(t, 1, nil)
	p := newProber(t, f.config(t, `"health_timeout_s":1`), probe.Options{})
	if e := p.Inference(context.Background(), "e0"); e != nil {
		t.Fatalf("healthy engine: %v", e)
	}
	if e := p.Stream(context.Background(), "e0", 16); e != nil {
		t.Fatalf("a 16-token stream from a healthy engine: %v", e)
	}
	_ = f.engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1})
	if e := p.Inference(context.Background(), "e0"); e == nil || fault.As(e).Status != 500 {
		t.Fatalf("an engine answering 500: %v", e)
	}
}
