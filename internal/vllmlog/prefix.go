package vllmlog

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// vLLM's process prefixes ("(EngineCore_DP0 pid=12)", [n1] in
// patterns.go) and ANSI colour: what the start of a raw line says about
// the process that printed it.

// headLen is how far into a line the level word and the process prefix
// are looked for.
const headLen = 256

// Head is what the start of a raw line says: its level word and the
// innermost named process prefix before it.
type Head struct {
	Level     string // "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"; "" when none
	PID       int64
	Name      []string // the prefix name's tokens ("Worker", "TP1"); nil without a prefix
	HasPrefix bool
	MsgStart  int // where the text after the prefix starts (0 without one)
}

// ReadHead reads a raw line's level word and named process prefix — the
// last "(Name pid=N)" before the level word, or anywhere in the line's
// head when there is no level.
func ReadHead(s string) Head {
	var h Head
	level := levelRE.FindStringSubmatchIndex(s[:min(len(s), headLen)])
	if level != nil {
		h.Level = s[level[2]:level[3]]
	}
	h.PID, h.Name, h.HasPrefix, h.MsgStart = namedPrefix(s, level)
	return h
}

// namedPrefix finds the innermost process prefix — the last "(Name pid=N)"
// before the level word, or anywhere in the line's head when there is no
// level. It returns the name tokens and where the message after the
// prefix starts.
func namedPrefix(s string, level []int) (int64, []string, bool, int) {
	head := s[:min(len(s), headLen)]
	if level != nil {
		head = s[:level[0]+1]
	}
	if !strings.Contains(head, " pid=") {
		return 0, nil, false, 0
	}
	all := prefixRE.FindAllStringSubmatchIndex(head, -1)
	if all == nil {
		return 0, nil, false, 0
	}
	last := all[len(all)-1]
	pid, err := strconv.ParseInt(head[last[6]:last[7]], 10, 64)
	if err != nil {
		return 0, nil, false, 0
	}
	name := head[last[2]:last[3]] + head[last[4]:last[5]]
	return pid, tokSplitRE.Split(name, -1), true, last[1]
}

var (
	prefixRE   = regexp.MustCompile(`\(([A-Za-z][A-Za-z0-9_]*)((?:[ _](?:rank=)?[A-Za-z]*[0-9]+)*) pid=([0-9]+)(?:, ip=[0-9A-Fa-f.:]+)?\)`)
	levelRE    = regexp.MustCompile(`(?:^|[\s)\]|:])(DEBUG|INFO|WARNING|ERROR|CRITICAL)[\s:]`)
	tokSplitRE = regexp.MustCompile(`[ _]`)
)

// StripANSI removes ANSI colour and cursor escapes from a log line. It
// returns b itself when the line has none.
// It removes ESC '[' digits-and-semicolons letter, by a loop rather than a
// regexp: every line of logs of any size is read through it.
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
	head := line[:min(len(line), headLen)]
	if !strings.Contains(head, " pid=") {
		return 0, 0, false
	}
	if pid, end, ok := simplePrefix(head); ok {
		return pid, end, true
	}
	level := levelRE.FindStringSubmatchIndex(head)
	pid, _, has, end := namedPrefix(line, level)
	if !has {
		return 0, 0, false
	}
	return pid, end, true
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
// at the start of a line, which the named-prefix pattern (a process name
// first) does not cover.
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
