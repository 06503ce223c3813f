package simengine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/profile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastProfile keeps real-clock tests quick: 1 ms prefill, 0.2 ms tokens.
func fastProfile() profile.Row {
	p := DefaultProfile("sim-0")
	p.TTFTA, p.TTFTB, p.TTFTC = 0, 0, 0.001
	p.TPOTSlope, p.TPOTIntercept = 1e-9, 0.0002
	zero := 0.0
	p.TPOTRequestSlope = &zero
	return p
}

func startEngine(t testing.TB, mod func(*Config)) *Engine {
	t.Helper()
	c := Config{Model: "sim-model", Profile: fastProfile(), KVCapacityTokens: 65536}
	if mod != nil {
		mod(&c)
	}
	e, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

var client = &http.Client{Timeout: 20 * time.Second}

func post(t testing.TB, url string, body any, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// sseEvents splits an SSE body into its data payloads.
func sseEvents(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("SSE line without data: prefix: %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

// streamText concatenates a completion stream's text and returns the last
// finish reason seen.
func streamText(t testing.TB, events []string, chat bool) (string, string) {
	t.Helper()
	var sb strings.Builder
	fin := ""
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text         string                   `json:"text"`
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			if chat {
				sb.WriteString(ch.Delta.Content)
			} else {
				sb.WriteString(ch.Text)
			}
			if ch.FinishReason != nil {
				fin = *ch.FinishReason
			}
		}
	}
	return sb.String(), fin
}

func postRaw(t testing.TB, url string, raw []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
