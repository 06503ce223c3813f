package vllm

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
)

func TestDataBuffered(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"data: a\n\ndata: b\n\n", true},
		{"data: a\ndata: b\n", true},
		{"data: a\n\n: keep-alive\n\ndata: b\n", true},
		{"data: a\n\ndata: b", false}, // the next line is still arriving
		{"data: a\n\n: keep-alive\n", false},
		{"data: a\n\n", false},
		{"data: a\rdata: b\n", false}, // a bare-CR split pending: be conservative
	} {
		l := lineReader{r: bufio.NewReader(strings.NewReader(tc.in))}
		if _, err := l.next(); err != nil {
			t.Fatal(err)
		}
		if got := l.dataBuffered(); got != tc.want {
			t.Errorf("%q: dataBuffered = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// loopBody replays one event forever.
type loopBody struct {
	ev []byte
	at int
}

func (b *loopBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], b.ev[b.at:])
		n += c
		b.at = (b.at + c) % len(b.ev)
	}
	return n, nil
}

const benchEvent = "data: {\"id\":\"cmpl-r-a1-decode\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" hi\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null,\"token_ids\":[5]}]}\n\n"

// TestStreamNextAllocations: reading an event costs one allocation, the
// copy of its bytes that outlives the read buffer.
func TestStreamNextAllocations(t *testing.T) {
	s := &Stream{lines: lineReader{r: bufio.NewReaderSize(&loopBody{ev: []byte(benchEvent)}, 16<<10)}}
	if n := testing.AllocsPerRun(500, func() {
		if ev, e := s.Next(); e != nil || ev.Tokens != 1 {
			t.Fatalf("event %+v, %v", ev, e)
		}
	}); n > 1 {
		t.Errorf("%v allocations per event, want ≤ 1", n)
	}
}

// TestStreamNextBuffered: the uncopied read allocates nothing, and Next's
// events stay intact across later reads while NextBuffered's need not.
func TestStreamNextBuffered(t *testing.T) {
	s := &Stream{lines: lineReader{r: bufio.NewReaderSize(&loopBody{ev: []byte(benchEvent)}, 16<<10)}}
	if n := testing.AllocsPerRun(500, func() {
		if ev, e := s.NextBuffered(); e != nil || ev.Tokens != 1 {
			t.Fatalf("event %+v, %v", ev, e)
		}
	}); n > 0 {
		t.Errorf("%v allocations per event, want 0", n)
	}
	body := &loopBody{ev: []byte("data: {\"choices\":[]}\n\ndata: {\"usage\":null}\n\n")}
	s = &Stream{lines: lineReader{r: bufio.NewReaderSize(body, 16)}} // a tiny buffer: every read refills it
	own, _ := s.Next()
	for range 4 {
		_, _ = s.NextBuffered()
	}
	if string(own.Data) != `{"choices":[]}` {
		t.Errorf("Next's event changed under later reads: %q", own.Data)
	}
}

func BenchmarkStreamNext(b *testing.B) {
	s := &Stream{lines: lineReader{r: bufio.NewReaderSize(&loopBody{ev: []byte(benchEvent)}, 16<<10)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, e := s.Next(); e != nil {
			b.Fatal(e)
		}
	}
}

// TestIdleTimeoutCountsFromTheLastLine: a stream that keeps talking more
// often than the bound lives past it; silence after that still ends it.
func TestIdleTimeoutCountsFromTheLastLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for range 8 {
			_, _ = w.Write([]byte("data: {\"choices\":[]}\n\n"))
			w.(http.Flusher).Flush()
			time.Sleep(25 * time.Millisecond)
		}
		<-r.Context().Done()
	}))
	s := openTestStream(t, srv)
	s.SetIdleTimeout(100 * time.Millisecond)
	for i := range 8 {
		if _, e := s.Next(); e != nil {
			t.Fatalf("event %d: %v (the stream was talking every 25ms under a 100ms bound)", i, e)
		}
	}
	if _, e := s.Next(); e == nil || !fault.As(e).Timeout {
		t.Fatalf("error = %+v, want the between-token timeout once the engine went silent", e)
	}
}

// openTestStream opens a decode stream on srv, all closed at cleanup.
func openTestStream(t *testing.T, srv *httptest.Server) *Stream {
	t.Helper()
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, Options{})
	t.Cleanup(c.Close)
	s, e := c.OpenStream(context.Background(), "/v1/completions", []byte(`{}`), "x")
	if e != nil {
		t.Fatal(e)
	}
	t.Cleanup(s.Close)
	return s
}

func BenchmarkStreamNextBuffered(b *testing.B) {
	s := &Stream{lines: lineReader{r: bufio.NewReaderSize(&loopBody{ev: []byte(benchEvent)}, 16<<10)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, e := s.NextBuffered(); e != nil {
			b.Fatal(e)
		}
	}
}

// TestClosedStreamGaveBackItsBuffer: after Close the read buffer belongs
// to the pool, so the stream must not read from it again.
func TestClosedStreamGaveBackItsBuffer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"))
	}))
	s := openTestStream(t, srv)
	if ev, e := s.Next(); e != nil || ev.Done {
		t.Fatalf("first event %+v, %v", ev, e)
	}
	s.Close()
	s.Close() // twice is harmless
	if s.Ready() {
		t.Error("a closed stream reports a buffered event")
	}
	if _, e := s.NextBuffered(); e == nil || !strings.Contains(fault.As(e).Msg, "closed") {
		t.Errorf("read after Close = %v, want the closed-stream error", e)
	}
}

// TestStreamLineLongerThanItsBuffer: an event several times the stream's
// read buffer (a long tool call, a big logprobs object) arrives whole.
func TestStreamLineLongerThanItsBuffer(t *testing.T) {
	text := strings.Repeat("x", 3*streamBufSize+17)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"choices":[{"index":0,"text":"` + text + `","finish_reason":null,"token_ids":[7]}]}` + "\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	s := openTestStream(t, srv)
	defer s.Close()
	ev, e := s.Next()
	if e != nil || !strings.Contains(string(ev.Data), text) || ev.Tokens != 1 {
		t.Fatalf("long event: %v, %d bytes, %d tokens; want the whole %d-byte text as one token event", e, len(ev.Data), ev.Tokens, len(text))
	}
	if ev, e := s.Next(); e != nil || !ev.Done {
		t.Fatalf("after the long event: %+v, %v; want [DONE]", ev, e)
	}
}
