// Package testkit holds the helpers several packages' tests share: SSE
// parsing and a log buffer safe to read while a server writes it. It
// imports only the standard library, so any package's tests (internal or
// external) may use it; helpers that start narwhal parts live in
// testkit/simkit. Only tests import these packages.
package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// SSEData splits a complete SSE body into its data payloads ("[DONE]"
// included); a line that is neither blank nor "data: …" fails the test.
func SSEData(t testing.TB, body []byte) []string {
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

// StreamText concatenates the text of completion chunks (choices[].text)
// and chat chunks (choices[].delta.content) and returns the last finish
// reason seen; "[DONE]" is skipped.
func StreamText(t testing.TB, events []string) (text, finish string) {
	t.Helper()
	var b strings.Builder
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
			t.Fatalf("chunk %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Text + ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return b.String(), finish
}

// SyncBuffer is an io.Writer a test may read while another goroutine (a
// server's logger, a command's stdout) writes it.
type SyncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Count is how many lines written so far contain every one of parts.
func (s *SyncBuffer) Count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(s.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// client bounds every test request, so a hung server fails the test
// instead of stalling the suite.
var client = &http.Client{Timeout: 20 * time.Second}

// Get fetches url and returns the response (its body already read and
// closed) and the body; a transport error fails the test.
func Get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, req)
}

// Do sends req and returns the response (its body already read and
// closed) and the body; a transport error fails the test.
func Do(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Tool is the path of the external program name a test drives. Missing,
// it fails the test in CI (where make test installs it) and skips it
// elsewhere; install says how to get it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing in CI: make test installs it (%s)", name, install)
	}
	t.Skipf("%s not installed; %s", name, install)
	return ""
}

// Mentions fails the test, once for each, for the wants text does not
// contain; what names the text in the message.
func Mentions(t testing.TB, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
