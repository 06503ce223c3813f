package vllmlog

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestSplitProcessPrefix(t *testing.T) {
	cases := []struct {
		line string
		pid  int64
		rest string
		ok   bool
	}{
		{"(EngineCore_DP0 pid=12) INFO 01-01 00:00:00 [a.py:1] m", 12, " INFO 01-01 00:00:00 [a.py:1] m", true},
		{"(VllmWorker TP1 pid=7) ERROR x", 7, " ERROR x", true},
		{"(VllmWorker rank=2 pid=9) ERROR x", 9, " ERROR x", true},
		{"(RayWorkerWrapper pid=880, ip=192.168.10.60) INFO x", 880, " INFO x", true},
		{"(pid=77) INFO x", 77, " INFO x", true},
		{"(pid=77, ip=10.0.0.1) INFO x", 77, " INFO x", true},
		{"(pid=) INFO x", 0, "", false},
		{"INFO 01-01 00:00:00 [a.py:1] no prefix", 0, "", false},
	}
	for _, c := range cases {
		pid, end, ok := SplitProcessPrefix(c.line)
		if ok != c.ok || pid != c.pid || (ok && c.line[end:] != c.rest) {
			t.Errorf("%q: pid=%d ok=%v rest=%q", c.line, pid, ok, c.line[end:])
		}
	}
}

func TestLogNumbers(t *testing.T) {
	if b, err := DecimalBytes("14.9888", GiB); err != nil || b != 16094101452 {
		t.Errorf("14.9888 GiB = %d, %v", b, err)
	}
	if b, err := DecimalBytes("-0.3", GiB); err != nil || b != -322122547 {
		t.Errorf("-0.3 GiB = %d, %v", b, err)
	}
	if _, err := DecimalBytes("1e3", GiB); err == nil {
		t.Error("an exponent was accepted")
	}
	if n, err := ParseCount("447,088"); err != nil || n != 447088 {
		t.Errorf("447,088 = %d, %v", n, err)
	}
	if u, ok := UnitBytes("GB", true); !ok || u != GiB {
		t.Errorf("GB as GiB = %d %v", u, ok)
	}
	if got := string(StripANSI([]byte("\x1b[32mINFO\x1b[0m x"))); got != "INFO x" {
		t.Errorf("StripANSI = %q", got)
	}
}

// regexPrefix is the named-prefix pattern's reading, for comparison.
func regexPrefix(line string) (int64, int, bool) {
	head := line[:min(len(line), headLen)]
	if !strings.Contains(head, " pid=") {
		return 0, 0, false
	}
	pid, _, has, end := namedPrefix(line, levelRE.FindStringSubmatchIndex(head))
	return pid, end, has
}

// ansiRE is the escape pattern StripANSI's loop implements.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// TestSimplePrefixAgreesWithPattern: the regexp-free fast path gives the
// pattern's answer on every line it accepts.
func TestSimplePrefixAgreesWithPattern(t *testing.T) {
	parts := []string{"(", ")", " pid=", "12", "Engine", "Core", "_DP0", " TP1", " rank=3", ", ip=10.0.0.1", " INFO ", "x", " ", "=", "(A pid=9) "}
	r := rand.New(rand.NewPCG(1, 2))
	lines := []string{"(EngineCore_DP0 pid=12) INFO m", "(A pid=1) (B pid=2) INFO m", "(A pid=1) x (B pid=2) INFO m", "(A B pid=1) m", "(A_ pid=1)", "(A rank=1x pid=3) m"}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for j := r.IntN(9); j >= 0; j-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		lines = append(lines, b.String())
	}
	for _, l := range lines {
		p1, e1, ok1 := SplitProcessPrefix(l)
		p2, e2, ok2 := regexPrefix(l)
		if strings.HasPrefix(l, "(pid=") {
			continue // Ray's unnamed prefix is an extension
		}
		if ok1 != ok2 || p1 != p2 || (ok1 && e1 != e2) {
			t.Errorf("%q: fast %d,%d,%v pattern %d,%d,%v", l, p1, e1, ok1, p2, e2, ok2)
		}
	}
}

func TestStripANSIAgreesWithPattern(t *testing.T) {
	for _, s := range []string{"\x1b[32mINFO\x1b[0m", "\x1b[", "\x1b[1;2", "a\x1bb", "\x1b[1;31mERROR\x1b[0m\x1b", "\x1b[12;H", "\x1b]0;t\x07"} {
		if got, want := string(StripANSI([]byte(s))), string(ansiRE.ReplaceAll([]byte(s), nil)); got != want {
			t.Errorf("%q: %q, pattern %q", s, got, want)
		}
	}
}
