package router

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// flushCounter is a client connection that records what was flushed.
type flushCounter struct {
	h       http.Header
	buf     bytes.Buffer
	flushed []string // the bytes each flush sent
	mark    int
}

func (w *flushCounter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *flushCounter) WriteHeader(int)             {}
func (w *flushCounter) Write(b []byte) (int, error) { return w.buf.Write(b) }
func (w *flushCounter) Flush() {
	w.flushed = append(w.flushed, w.buf.String()[w.mark:])
	w.mark = w.buf.Len()
}

func relayFor(w http.ResponseWriter, ready func() bool, clientIDs bool) *relay {
	c := &call{rid: "req7", att: attempts{n: 2}, ex: exchange{w: w, committed: true}}
	c.adm.q.Stream, c.adm.q.ClientTokenIDs = true, clientIDs
	return newSink(c, ready).(*relay)
}

// TestRelayFrameIsTheOldFrame: the allocation-free frame is byte for byte
// what ownID + StripTokenIDs + framing produced.
func TestRelayFrameIsTheOldFrame(t *testing.T) {
	for _, clientIDs := range []bool{false, true} {
		s := relayFor(&flushCounter{}, nil, clientIDs)
		for _, data := range []string{
			`{"id":"cmpl-req7-a2-decode","choices":[{"index":0,"text":"x","token_ids":[1,2]}]}`,
			`{"id":"chatcmpl-req7-a2-decode","choices":[{"delta":{"content":"req7-a2-decode"},"token_ids":[3]}],"prompt_token_ids":[4]}`,
			`{"id":"cmpl-other","choices":[]}`,
			`not json "token_ids":[1]`,
		} {
			ev, _ := parseEventForTest(data)
			want := ev.Data
			want = s.c.ownID(want)
			if !ev.NotJSON && !clientIDs {
				want = openai.StripTokenIDs(want)
			}
			got := s.appendFrame(nil, ev)
			if string(got) != "data: "+string(want)+"\n\n" {
				t.Errorf("clientIDs=%v %s:\n got %q\nwant %q", clientIDs, data, got, "data: "+string(want)+"\n\n")
			}
		}
	}
}

func parseEventForTest(data string) (vllm.Event, bool) {
	ev := vllm.Event{Data: []byte(data)}
	ev.NotJSON = data[0] != '{'
	ev.Tokens = 1
	return ev, true
}

// TestRelayFlushesUnlessTheNextEventIsBuffered: a token waits for no
// engine read; it shares a flush only with an event already in hand.
func TestRelayFlushesUnlessTheNextEventIsBuffered(t *testing.T) {
	w := &flushCounter{}
	buffered := []bool{true, true, false, false}
	i := 0
	s := relayFor(w, func() bool { i++; return buffered[i-1] }, true)
	for _, text := range []string{"a", "b", "c", "d"} {
		if e := s.event(vllm.Event{Data: []byte(`{"t":"` + text + `"}`), Tokens: 1}); e != nil {
			t.Fatal(e)
		}
	}
	want := []string{"data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\ndata: {\"t\":\"c\"}\n\n", "data: {\"t\":\"d\"}\n\n"}
	if len(w.flushed) != 2 || w.flushed[0] != want[0] || w.flushed[1] != want[1] {
		t.Fatalf("flushes = %q, want %q", w.flushed, want)
	}
	if e := s.finish(); e != nil || w.flushed[2] != "data: [DONE]\n\n" {
		t.Fatalf("finish: %v, flushes %q", e, w.flushed)
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) Flush()                      {}

// TestRelayAllocations: relaying a token allocates nothing (the one copy
// per event is Stream.Next's; vllm's TestStreamNextAllocations).
func TestRelayAllocations(t *testing.T) {
	s := relayFor(&discard{h: http.Header{}}, func() bool { return false }, false)
	data := `{"id":"cmpl-req7-a2-decode","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[5]}]}`
	ev := vllm.Event{Data: []byte(data), Tokens: 1, Output: true}
	_ = s.event(ev) // sizes the frame buffer
	if n := testing.AllocsPerRun(200, func() { _ = s.event(ev) }); n > 0 {
		t.Errorf("%v allocations per relayed token, want 0", n)
	}
}

// BenchmarkRelayEvent: the router's own work per relayed token once the
// event is parsed (frame, id splice, token-id cut, write, flush).
func BenchmarkRelayEvent(b *testing.B) {
	s := relayFor(&discard{h: http.Header{}}, func() bool { return false }, false)
	ev := vllm.Event{Data: []byte(`{"id":"cmpl-req7-a2-decode","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[5]}]}`), Tokens: 1, Output: true}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.event(ev)
	}
}
