package diagnose

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// The streaming scanner. It reads a log of any size line by line with
// bounded memory: a line longer than the limit is cut (its tail is read and
// dropped, never buffered), and every table the scan grows has a cap.
// Each line loses, in order: a container-runtime timestamp, a compose
// service prefix ("engine-1  | "), ANSI escapes, the vLLM process prefix
// ("(EngineCore_DP0 pid=12)", "(VllmWorker TP1 pid=…)", Ray's
// "(RayWorkerWrapper pid=…, ip=…)"), torch's "[rank0]: ", the log header
// ("INFO 05-06 12:00:00 [file.py:123] ", older "file.py:123] ", uvicorn's
// "ERROR:    ") and Ray's " [repeated 3x across cluster]" suffix. What is
// left is the message, which the traceback tracker and the matchers read.

// defaultMaxLine is the default line limit: failure messages are short,
// and a multi-megabyte config dump must not cost memory.
const defaultMaxLine = 64 << 10

// Caps on what a scan keeps, so memory stays bounded for any input.
const (
	maxProcs      = 256 // distinct processes tracked; later ones share one slot
	maxFrames     = 48  // engine frames kept per traceback (innermost kept)
	maxExceptions = 512 // exceptions kept (the first ones: root causes come first)
)

// level is a log line's level.
type level uint8

const (
	lvlNone level = iota
	lvlDebug
	lvlInfo
	lvlWarning
	lvlError
	lvlCritical
)

// procKey identifies the process a line came from: a pid from the vLLM
// prefix, a torch rank from "[rankN]:", or the unprefixed main process.
type procKey struct {
	kind uint8 // 0 main, 1 pid, 2 torch rank
	id   int64
}

// line is one scanned line. msg and file are log text: they never leave
// the package (only typed values extracted from them do).
type line struct {
	n     int
	proc  procKey
	level level
	file  string // the header's file stem ("kv_cache_utils"), "" if none
	msg   string
}

// lineReader reads lines with a length cap.
type lineReader struct {
	br        *bufio.Reader
	max       int
	buf       []byte
	truncated int
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = defaultMaxLine
	}
	return &lineReader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// next returns the next line without its terminator; the slice is valid
// until the following call. It returns io.EOF after the last line.
func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	cut, got := false, false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		got = got || len(chunk) > 0
		body := chunk
		if err == nil {
			body = chunk[:len(chunk)-1]
		}
		if room := lr.max - len(lr.buf); len(body) > room {
			cut, body = true, body[:room]
		}
		lr.buf = append(lr.buf, body...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && !got:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		if cut {
			lr.truncated++
		}
		return bytes.TrimRight(lr.buf, "\r"), nil
	}
}

// splitLine strips the prefixes and header off one raw line.
func splitLine(raw []byte, n int) line {
	raw = memory.StripANSI(raw)
	s := string(raw)
	s = stripRuntimeTimestamp(s)
	s = stripComposePrefix(s)
	ln := line{n: n}
	if pid, end, ok := memory.SplitProcessPrefix(s); ok {
		ln.proc = procKey{kind: 1, id: pid}
		s = strings.TrimPrefix(s[end:], " ")
	}
	if r, rest, ok := torchRankPrefix(s); ok {
		if ln.proc.kind == 0 {
			ln.proc = procKey{kind: 2, id: r}
		}
		s = rest
	}
	ln.level, ln.file, s = stripHeader(s)
	s = strings.TrimSuffix(s, " ")
	if strings.HasSuffix(s, " across cluster]") {
		if i := strings.LastIndex(s, " [repeated "); i >= 0 {
			s = s[:i]
		}
	}
	ln.msg = s
	return ln
}

// stripRuntimeTimestamp removes a leading RFC 3339 timestamp as docker
// logs -t and kubectl --timestamps print it.
func stripRuntimeTimestamp(s string) string {
	if len(s) < 20 || !isDigit(s[0]) || s[4] != '-' || s[10] != 'T' {
		return s
	}
	sp := strings.IndexByte(s, ' ')
	if sp < 19 || sp > 40 {
		return s
	}
	return s[sp+1:]
}

// stripComposePrefix removes docker compose's "service-1  | " prefix: a
// name of [A-Za-z0-9_.-], spaces, "| ". It stops at the first character
// that cannot belong to one, so an ordinary line costs a byte or two.
func stripComposePrefix(s string) string {
	i := 0
	for i < len(s) && i < 64 && (isAlnum(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.') {
		i++
	}
	if i == 0 || i >= len(s) || s[i] != ' ' {
		return s
	}
	j := i
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if !strings.HasPrefix(s[j:], "| ") {
		return s
	}
	return s[j+2:]
}

// torchRankPrefix reads torch.distributed's "[rank0]: " prefix.
func torchRankPrefix(s string) (int64, string, bool) {
	if !strings.HasPrefix(s, "[rank") {
		return 0, s, false
	}
	end := strings.Index(s, "]:")
	if end < 6 || end > 12 {
		return 0, s, false
	}
	r, err := strconv.ParseInt(s[5:end], 10, 32)
	if err != nil {
		return 0, s, false
	}
	return r, strings.TrimPrefix(s[end+2:], " "), true
}

var levelWords = [...]struct {
	w string
	l level
}{{"DEBUG", lvlDebug}, {"INFO", lvlInfo}, {"WARNING", lvlWarning}, {"ERROR", lvlError}, {"CRITICAL", lvlCritical}, {"WARN", lvlWarning}}

// stripHeader removes vLLM's "LEVEL MM-DD HH:MM:SS [file.py:N] " header
// (the older form has no "[", newer ones may add milliseconds or a
// year), or uvicorn's "LEVEL:    ". It returns the level and the header's
// file stem.
func stripHeader(s string) (level, string, string) {
	var lv level
	var rest string
	for _, w := range levelWords {
		if strings.HasPrefix(s, w.w) {
			lv, rest = w.l, s[len(w.w):]
			break
		}
	}
	if lv == lvlNone {
		return lvlNone, "", s
	}
	if strings.HasPrefix(rest, ":") { // uvicorn: "ERROR:    [Errno 98] …"
		return lv, "", strings.TrimLeft(rest[1:], " ")
	}
	if !strings.HasPrefix(rest, " ") {
		return lvlNone, "", s
	}
	rest = rest[1:]
	// date and time: "05-06 12:00:00", "2025-05-06 12:00:00,123", "12:00:00.123"
	i := 0
	for i < len(rest) && i < 32 && (isDigit(rest[i]) || rest[i] == '-' || rest[i] == ':' || rest[i] == ' ' || rest[i] == '.' || rest[i] == ',') {
		i++
	}
	if i < 8 {
		return lvlNone, "", s
	}
	rest = rest[i:]
	rest = strings.TrimPrefix(rest, "[")
	// "file.py:123] "
	colon := strings.Index(rest[:min(len(rest), 160)], ".py:")
	if colon < 0 {
		return lv, "", rest
	}
	close := strings.Index(rest[colon:min(len(rest), colon+16)], "]")
	if close < 0 {
		return lv, "", rest
	}
	file := rest[:colon]
	if j := strings.LastIndexByte(file, '/'); j >= 0 {
		file = file[j+1:]
	}
	msg := rest[colon+close+1:]
	msg = strings.TrimPrefix(msg, " ")
	return lv, file, msg
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
