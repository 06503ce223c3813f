package memory

import (
	"bytes"
	"strconv"
	"strings"
)

// Exported log-line helpers, shared with internal/diagnose so that there is
// one reading of vLLM's process prefixes and logged numbers. They wrap the
// startup-log parser's own helpers; they do not copy them.

// StripANSI removes ANSI colour and cursor escapes from a log line. It
// returns b itself when the line has none.
// It removes exactly what the startup-log parser's pattern removes
// (ESC '[' digits-and-semicolons letter), by a loop rather than a regexp:
// the diagnosis reads every line of logs of any size through it.
func StripANSI(b []byte) []byte {
	i := bytes.IndexByte(b, 0x1b)
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:i]...)
	for i < len(b) {
		if b[i] == 0x1b {
			if n := ansiLen(b[i:]); n > 0 {
				i += n
				continue
			}
		}
		out = append(out, b[i])
		i++
	}
	return out
}

// ansiLen is the length of the escape sequence at the start of b, or 0.
func ansiLen(b []byte) int {
	if len(b) < 3 || b[1] != '[' {
		return 0
	}
	for j := 2; j < len(b); j++ {
		c := b[j]
		switch {
		case c >= '0' && c <= '9', c == ';':
			continue
		case (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'):
			return j + 1
		}
		return 0
	}
	return 0
}

// SplitProcessPrefix finds the process prefix vLLM puts on worker lines —
// the innermost "(EngineCore_DP0 pid=12)", "(VllmWorker TP1 pid=12)",
// "(VllmWorker rank=1 pid=12)", "(RayWorkerWrapper pid=12, ip=10.0.0.1)" —
// before the level word, or anywhere in the line's head when the line has
// no level. It returns the pid and where the text after the prefix starts.
func SplitProcessPrefix(line string) (pid int64, end int, ok bool) {
	if strings.HasPrefix(line, "(pid=") {
		return rayTaskPrefix(line)
	}
	head := line[:min(len(line), vlogHeadLen)]
	if !strings.Contains(head, " pid=") {
		return 0, 0, false
	}
	if pid, end, ok := simplePrefix(head); ok {
		return pid, end, true
	}
	level := vlogLevelRE.FindStringSubmatchIndex(head)
	key, _, has, end := vlogPrefix(line, level)
	if !has {
		return 0, 0, false
	}
	return key.pid, end, true
}

// simplePrefix is the common case without a regexp: the line starts with
// the only process prefix in its head, "(Name pid=N)", "(Name TP1 pid=N)",
// "(Name rank=1 pid=N)" or "(Name pid=N, ip=A)". It accepts only text the
// prefix pattern accepts, and only when no other " pid=" follows (the
// pattern would pick the last prefix), so the result is the pattern's.
func simplePrefix(head string) (int64, int, bool) {
	if len(head) < 8 || head[0] != '(' {
		return 0, 0, false
	}
	p := strings.Index(head, " pid=")
	name := head[1:p]
	if !simpleName(name) {
		return 0, 0, false
	}
	j := p + len(" pid=")
	k := j
	for k < len(head) && head[k] >= '0' && head[k] <= '9' {
		k++
	}
	if k == j || k-j > 18 || k >= len(head) {
		return 0, 0, false
	}
	end := -1
	switch {
	case head[k] == ')':
		end = k + 1
	case strings.HasPrefix(head[k:], ", ip="):
		m := k + len(", ip=")
		n := m
		for n < len(head) && isIPChar(head[n]) {
			n++
		}
		if n > m && n < len(head) && head[n] == ')' {
			end = n + 1
		}
	}
	if end < 0 || strings.Contains(head[end:], " pid=") {
		return 0, 0, false
	}
	pid, err := strconv.ParseInt(head[j:k], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, end, true
}

// simpleName: a letter, then [A-Za-z0-9_], then space-separated tokens
// "(rank=)?[A-Za-z]*[0-9]+".
func simpleName(s string) bool {
	word, rest, _ := strings.Cut(s, " ")
	if word == "" || !isLetter(word[0]) {
		return false
	}
	for i := 0; i < len(word); i++ {
		if !isLetter(word[i]) && !isDigitByte(word[i]) && word[i] != '_' {
			return false
		}
	}
	for rest != "" {
		var tok string
		tok, rest, _ = strings.Cut(rest, " ")
		tok = strings.TrimPrefix(tok, "rank=")
		i := 0
		for i < len(tok) && isLetter(tok[i]) {
			i++
		}
		if i == len(tok) {
			return false
		}
		for ; i < len(tok); i++ {
			if !isDigitByte(tok[i]) {
				return false
			}
		}
	}
	return true
}

func isLetter(c byte) bool    { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') }
func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }
func isIPChar(c byte) bool {
	return isDigitByte(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.' || c == ':'
}

// rayTaskPrefix reads Ray's unnamed "(pid=12)" or "(pid=12, ip=10.0.0.1)"
// at the start of a line, which the startup-log parser's pattern (a
// process name first) does not cover.
func rayTaskPrefix(line string) (int64, int, bool) {
	i := len("(pid=")
	j := i
	for j < len(line) && j < i+10 && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	if j == i || j >= len(line) {
		return 0, 0, false
	}
	pid, err := strconv.ParseInt(line[i:j], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if line[j] == ')' {
		return pid, j + 1, true
	}
	if !strings.HasPrefix(line[j:], ", ip=") {
		return 0, 0, false
	}
	k := strings.IndexByte(line[j:min(len(line), j+64)], ')')
	if k < 0 {
		return 0, 0, false
	}
	return pid, j + k + 1, true
}

// LogUnitBytes maps a logged unit ("GiB", "MiB", "KiB", "GB", "MB") to its
// size in bytes. gbIsGiB says the printing source divides by 2^30 and
// still prints "GB".
func LogUnitBytes(unit string, gbIsGiB bool) (int64, bool) { return vlogUnitBytes(unit, gbIsGiB) }

// LogDecimalBytes converts a logged decimal ("14.9888", "-0.3") times a
// unit to bytes exactly, by integer arithmetic, rounding half away from
// zero. It fails on anything but [-]digits[.digits] and on results beyond
// ±2^53.
func LogDecimalBytes(num string, unit int64) (int64, error) {
	d, err := vlogParseDecimal(num)
	if err != nil {
		return 0, err
	}
	return d.toBytes(unit)
}

// LogCount reads a logged token or block count, with or without thousands
// separators ("447,088", "2048").
func LogCount(s string) (int64, error) { return vlogParseCount(s) }
