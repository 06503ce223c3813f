// Package vllmlog reads vLLM engine logs: the one reader of them. It
// splits a log into bounded lines, strips what container runtimes,
// compose, ANSI colour, vLLM's process prefixes, torch.distributed and
// vLLM's logger put around a message, reads logged numbers exactly, and
// holds the one table of vLLM's memory-accounting lines (patterns.go),
// each with the vLLM source that prints it. evidence/memory builds
// memory observations from it and diagnose builds failure facts from it.
//
// Nothing here keeps log text: Line.Msg is valid while the caller
// matches it, and what leaves a consumer is typed values only (the log
// sanitization contract, reference/evidence.md §2.12).
package vllmlog

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
)

// MaxLine is the default line limit: memory and failure lines are short,
// and a multi-megabyte config dump must not cost memory.
const MaxLine = 64 << 10

// Reader reads lines with a length cap: a line longer than the cap is cut
// (its tail is read and dropped, never buffered).
type Reader struct {
	br        *bufio.Reader
	max       int
	buf       []byte
	truncated int
}

// NewReader reads r with lines cut at max bytes (≤ 0: MaxLine).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = MaxLine
	}
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// Truncated is how many lines so far were longer than the cap.
func (lr *Reader) Truncated() int { return lr.truncated }

// Next returns the next line without its terminator and trailing CRs; the
// slice is valid until the following call. It returns io.EOF after the
// last line.
func (lr *Reader) Next() ([]byte, error) {
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

// Level is a log line's level.
type Level uint8

// Levels.
const (
	LevelNone Level = iota
	LevelDebug
	LevelInfo
	LevelWarning
	LevelError
	LevelCritical
)

// Line is one raw line with its wrapping removed.
type Line struct {
	PID       int64 // from vLLM's process prefix, when HasPID
	HasPID    bool
	TorchRank int64 // from torch's "[rankN]: ", when HasRank
	HasRank   bool
	Level     Level
	File      string // the header's file stem ("kv_cache_utils"), "" if none
	Msg       string // log text: match it, never keep it
}

// Split strips, in order: ANSI escapes, a container-runtime timestamp, a
// compose service prefix ("engine-1  | "), the vLLM process prefix
// ("(EngineCore_DP0 pid=12)", "(VllmWorker TP1 pid=…)", Ray's
// "(RayWorkerWrapper pid=…, ip=…)"), torch's "[rank0]: ", the log header
// ("INFO 05-06 12:00:00 [file.py:123] ", older "file.py:123] ", uvicorn's
// "ERROR:    ") and Ray's " [repeated 3x across cluster]" suffix. What is
// left is the message.
func Split(raw []byte) Line {
	s := string(StripANSI(raw))
	s = stripRuntimeTimestamp(s)
	s = stripComposePrefix(s)
	var ln Line
	if pid, end, ok := SplitProcessPrefix(s); ok {
		ln.PID, ln.HasPID = pid, true
		s = strings.TrimPrefix(s[end:], " ")
	}
	if r, rest, ok := torchRankPrefix(s); ok {
		ln.TorchRank, ln.HasRank = r, true
		s = rest
	}
	ln.Level, ln.File, s = stripHeader(s)
	s = strings.TrimSuffix(s, " ")
	if strings.HasSuffix(s, " across cluster]") {
		if i := strings.LastIndex(s, " [repeated "); i >= 0 {
			s = s[:i]
		}
	}
	ln.Msg = s
	return ln
}

// stripRuntimeTimestamp removes a leading RFC 3339 timestamp as docker
// logs -t and kubectl --timestamps print it.
func stripRuntimeTimestamp(s string) string {
	if len(s) < 20 || !isDigitByte(s[0]) || s[4] != '-' || s[10] != 'T' {
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
	for i < len(s) && i < 64 && (isLetter(s[i]) || isDigitByte(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.') {
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
	l Level
}{{"DEBUG", LevelDebug}, {"INFO", LevelInfo}, {"WARNING", LevelWarning}, {"ERROR", LevelError}, {"CRITICAL", LevelCritical}, {"WARN", LevelWarning}}

// stripHeader removes vLLM's "LEVEL MM-DD HH:MM:SS [file.py:N] " header
// (the older form has no "[", newer ones may add milliseconds or a
// year), or uvicorn's "LEVEL:    ". It returns the level and the header's
// file stem.
func stripHeader(s string) (Level, string, string) {
	var lv Level
	var rest string
	for _, w := range levelWords {
		if strings.HasPrefix(s, w.w) {
			lv, rest = w.l, s[len(w.w):]
			break
		}
	}
	if lv == LevelNone {
		return LevelNone, "", s
	}
	if strings.HasPrefix(rest, ":") { // uvicorn: "ERROR:    [Errno 98] …"
		return lv, "", strings.TrimLeft(rest[1:], " ")
	}
	if !strings.HasPrefix(rest, " ") {
		return LevelNone, "", s
	}
	rest = rest[1:]
	// date and time: "05-06 12:00:00", "2025-05-06 12:00:00,123", "12:00:00.123"
	i := 0
	for i < len(rest) && i < 32 && (isDigitByte(rest[i]) || rest[i] == '-' || rest[i] == ':' || rest[i] == ' ' || rest[i] == '.' || rest[i] == ',') {
		i++
	}
	if i < 8 {
		return LevelNone, "", s
	}
	file, msg := headerFile(rest[i:])
	return lv, file, msg
}

// headerFile splits "[file.py:123] msg" (or "file.py:123] msg") into the
// file stem and the message.
func headerFile(rest string) (string, string) {
	rest = strings.TrimPrefix(rest, "[")
	colon := strings.Index(rest[:min(len(rest), 160)], ".py:")
	if colon < 0 {
		return "", rest
	}
	close := strings.Index(rest[colon:min(len(rest), colon+16)], "]")
	if close < 0 {
		return "", rest
	}
	file := rest[:colon]
	if j := strings.LastIndexByte(file, '/'); j >= 0 {
		file = file[j+1:]
	}
	return file, strings.TrimPrefix(rest[colon+close+1:], " ")
}
