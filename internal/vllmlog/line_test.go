package vllmlog

import (
	"io"
	"strings"
	"testing"
)

// TestLineReaderTruncates: an over-long line is cut at the limit, counted,
// and the next line is read whole; memory does not grow with the line.
func TestLineReaderTruncates(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	in := "short\n" + long + "\nafter\nno newline at end"
	lr := NewReader(strings.NewReader(in), 100)
	var got []string
	for {
		b, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	want := []string{"short", long[:100], "after", "no newline at end"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
	if lr.Truncated() != 1 {
		t.Errorf("truncated %d, want 1", lr.Truncated())
	}
	if cap(lr.buf) > 4096 {
		t.Errorf("line buffer grew to %d bytes for a 100-byte limit", cap(lr.buf))
	}
}
