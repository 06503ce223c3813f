package progress

import (
	"bytes"
	"strings"
	"testing"
)

// Off a terminal: one plain line per changed step, no carriage return or
// escape code, a last line on Finish; quiet writes nothing; nothing after
// Finish.
func TestPlainLinesOffATerminal(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "narwhal-x", false)
	b.Set(0, "p0 prefill 0/3")
	b.Set(0.1, "p0 prefill 0/3") // same step: no new line
	b.Set(0.5, "p0 decode 1/2")
	b.Finish("done")
	b.Set(0.9, "late")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "narwhal-x: p0 prefill 0/3 (0%") || !strings.HasPrefix(lines[1], "narwhal-x: p0 decode 1/2 (50%, eta ") ||
		!strings.HasPrefix(lines[2], "narwhal-x: done (") {
		t.Fatalf("lines:\n%s", out.String())
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Fatalf("a carriage return or escape code off a terminal: %q", out.String())
	}
	var quiet bytes.Buffer
	q := New(&quiet, "narwhal-x", true)
	q.Set(0.5, "x")
	q.Finish("done")
	if quiet.Len() != 0 {
		t.Fatalf("quiet wrote %q", quiet.String())
	}
}
