package vllm

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

const sseHead = "HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 16:00:00 GMT\r\nserver: uvicorn\r\n" +
	"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"

var responseSeeds = []string{
	sseHead + "10\r\ndata: {\"a\":1}\n\n\r\n" + "e\r\ndata: [DONE]\n\r\n" + "0\r\n\r\n" + "HTTP/1.1 200 OK\r\n",
	"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: application/json\r\n\r\nhello" + "next",
	"HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\nConnection: close\r\n\r\n{\"detail\":\"x\"}",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: v\r\n\r\nrest",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n0\r\nX-T: v\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi",
	"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhi",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nhi",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
	"",
	"HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Long: "+strings.Repeat("v", 100)+"\r\n", 50) + "Content-Length: 0\r\n\r\n",
}

// readOutcome is one response read from a connection's bytes: its
// status, framing and body, and what is left on the connection after it.
type readOutcome struct {
	err, bodyErr bool
	status       int
	close        bool
	length       int64
	body, rest   string
}

func readWith(in []byte, read func(*bufio.Reader, *http.Request) (*http.Response, error)) readOutcome {
	br := bufio.NewReaderSize(bytes.NewReader(in), 1024)
	req, _ := http.NewRequest(http.MethodPost, "http://e/v1/completions", nil)
	resp, err := read(br, req)
	if err != nil {
		return readOutcome{err: true}
	}
	body, berr := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := readOutcome{status: resp.StatusCode, close: resp.Close, length: resp.ContentLength, body: string(body), bodyErr: berr != nil}
	if berr == nil {
		rest, _ := io.ReadAll(br)
		out.rest = string(rest)
	}
	return out
}

// checkResponse holds readResponse to http.ReadResponse on in: the same
// status, framing, body and connection state after it.
func checkResponse(t *testing.T, in []byte) bool {
	t.Helper()
	got := readWith(in, readResponse)
	want := readWith(in, http.ReadResponse)
	if got != want {
		t.Fatalf("response %q:\nreadResponse      %+v\nhttp.ReadResponse %+v", in, got, want)
	}
	br := bufio.NewReaderSize(bytes.NewReader(in), 1024)
	head, ok := peekHead(br)
	if !ok {
		return false
	}
	_, _, ok = parseHead(head)
	return ok
}

// TestReadResponseIsReadResponse: every seed reads as net/http reads it,
// and the heads engines send are read by hand.
func TestReadResponseIsReadResponse(t *testing.T) {
	hand := 0
	for _, in := range responseSeeds {
		if checkResponse(t, []byte(in)) {
			hand++
		}
	}
	for i, in := range responseSeeds[:5] {
		if br := bufio.NewReader(strings.NewReader(in)); !func() bool {
			head, ok := peekHead(br)
			if !ok {
				return false
			}
			_, _, ok = parseHead(head)
			return ok
		}() {
			t.Errorf("seed %d, an engine's usual answer, went to http.ReadResponse", i)
		}
	}
	if hand < 6 {
		t.Errorf("%d seeds read by hand, want at least 6", hand)
	}
}

// FuzzReadResponse: go test -fuzz FuzzReadResponse ./internal/vllm/
func FuzzReadResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkResponse(t, in) })
}
