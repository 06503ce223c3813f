package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// readResponse reads a response head from br. The heads engines send
// (HTTP/1.1, a final status with a body, Content-Length or chunked
// framing, a few plain header lines) are parsed in place; http.ReadResponse
// built a header map, a string per header and its transfer machinery
// for them, twenty-odd allocations per leg, for headers nobody here reads.
// Anything else goes to http.ReadResponse, which sees the same bytes: the
// fast path consumes nothing unless it answers. The answer's Header is
// empty; engine answers are judged by status and body.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodHead {
		return http.ReadResponse(br, req)
	}
	head, ok := peekHead(br)
	if !ok {
		return http.ReadResponse(br, req)
	}
	resp, chunked, ok := parseHead(head)
	if !ok {
		return http.ReadResponse(br, req)
	}
	_, _ = br.Discard(len(head))
	resp.Request = req
	if chunked {
		resp.Body = &chunkedBody{br: br, r: httputil.NewChunkedReader(br)}
	} else {
		resp.Body = &lengthBody{br: br, n: resp.ContentLength}
	}
	return resp, nil
}

// peekHead waits for a whole head in br's buffer, without consuming it. It
// gives up (false) on a read error, which http.ReadResponse then reports,
// or a head longer than the buffer.
// A line ending in a bare LF is left to it too, as soon as it is seen.
func peekHead(br *bufio.Reader) ([]byte, bool) {
	if _, err := br.Peek(1); err != nil {
		return nil, false
	}
	for start := 0; ; {
		buf, _ := br.Peek(br.Buffered())
		for {
			i := bytes.IndexByte(buf[start:], '\n')
			if i < 0 {
				break
			}
			end := start + i + 1
			if i == 0 || buf[end-2] != '\r' {
				return nil, false
			}
			if end-start == 2 {
				return buf[:end], true // the blank line
			}
			start = end
		}
		if len(buf) >= br.Size() {
			return nil, false
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			return nil, false
		}
	}
}

// parseHead reads a plain head (see readResponse); ok is false for any
// other.
func parseHead(head []byte) (resp *http.Response, chunked, ok bool) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	code, ok := statusCode(line)
	if !ok {
		return nil, false, false
	}
	resp = &http.Response{StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1,
		Status: statusText(code, line)}
	var sawLength bool
	for len(rest) > 2 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !fieldName(name) || !fieldValue(value) {
			return nil, false, false // a folded line, a bad byte
		}
		value = bytes.Trim(value, " \t")
		switch {
		case foldEq(name, "Content-Length"):
			if sawLength || len(value) == 0 || len(value) > 18 || !digitsOnly(value) {
				return nil, false, false
			}
			resp.ContentLength, _ = strconv.ParseInt(string(value), 10, 64)
			sawLength = true
		case foldEq(name, "Transfer-Encoding"):
			if chunked || !foldEq(value, "chunked") {
				return nil, false, false
			}
			chunked = true
		case foldEq(name, "Connection"):
			if !connectionTokens(value, resp) {
				return nil, false, false
			}
		case foldEq(name, "Trailer"):
			return nil, false, false
		}
	}
	if sawLength == chunked {
		return nil, false, false // both, or a body that ends at the close
	}
	return resp, chunked, true
}

// statusCode reads "HTTP/1.1 NNN[ reason]": a final status that has a body.
func statusCode(line []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 3 || (len(rest) > 3 && rest[3] != ' ') {
		return 0, false
	}
	code := 0
	for _, c := range rest[:3] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return 0, false
	}
	return code, true
}

// statusText is Response.Status: "200 OK" without an allocation for the
// usual answer.
func statusText(code int, line []byte) string {
	if code == http.StatusOK && string(line) == "HTTP/1.1 200 OK" {
		return "200 OK"
	}
	return string(line[len("HTTP/1.1 "):])
}

// connectionTokens sets resp.Close for a Connection header of close and
// keep-alive tokens; any other token (an upgrade) is left to net/http.
func connectionTokens(value []byte, resp *http.Response) bool {
	for _, tok := range bytes.Split(value, []byte(",")) {
		tok = bytes.Trim(tok, " \t")
		switch {
		case foldEq(tok, "close"):
			resp.Close = true
		case foldEq(tok, "keep-alive"):
		default:
			return false
		}
	}
	return true
}

// foldEq is ASCII case-insensitive equality.
func foldEq(a []byte, b string) bool { return len(a) == len(b) && asciiFold(a, b) }

// fieldName and fieldValue accept the bytes net/textproto accepts in a
// header line's name and value.
func fieldName(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return len(b) > 0
}

func fieldValue(b []byte) bool {
	for _, c := range b {
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}

func digitsOnly(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// lengthBody is a Content-Length body: a short one is io.ErrUnexpectedEOF.
type lengthBody struct {
	br *bufio.Reader
	n  int64 // bytes left
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	switch {
	case b.n == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// chunkedBody is a chunked body; its end consumes the trailer section, as
// net/http's body does, so the connection is ready for the next answer.
type chunkedBody struct {
	br  *bufio.Reader
	r   io.Reader
	err error // set once the body ended
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = b.trailer()
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

// trailer consumes what follows the last chunk: a bare CRLF, or trailer
// lines up to a blank one, with net/http's checks (a trailer must end
// within the buffer).
func (b *chunkedBody) trailer() error {
	buf, err := b.br.Peek(2)
	switch {
	case string(buf) == "\r\n":
		_, _ = b.br.Discard(2)
		return io.EOF
	case len(buf) < 2:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	for n := 4; ; n++ {
		buf, err := b.br.Peek(n)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			break
		}
		if err != nil {
			return errors.New("http: suspiciously long trailer after chunked body")
		}
	}
	if _, err := textproto.NewReader(b.br).ReadMIMEHeader(); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return io.EOF
}

func (b *chunkedBody) Close() error { return nil }
