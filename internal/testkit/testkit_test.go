package testkit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSSEDataAndStreamText(t *testing.T) {
	body := "data: {\"choices\":[{\"text\":\"he\"}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"length\"}]}\n\n" +
		"data: [DONE]\n\n"
	evs := SSEData(t, []byte(body))
	if len(evs) != 3 || evs[2] != "[DONE]" {
		t.Fatalf("events %q", evs)
	}
	if text, fin := StreamText(t, evs); text != "hello" || fin != "length" {
		t.Fatalf("StreamText = %q, %q; want hello, length", text, fin)
	}
}

func TestSyncBufferCount(t *testing.T) {
	var b SyncBuffer
	_, _ = b.Write([]byte("level=WARN msg=held iid=e1\nlevel=INFO msg=held iid=e2\nlevel=WARN msg=other iid=e1\n"))
	if n := b.Count("WARN", "iid=e1"); n != 2 {
		t.Fatalf("Count = %d, want 2", n)
	}
	if n := b.Count("msg=held", "e2"); n != 1 {
		t.Fatalf("Count = %d, want 1", n)
	}
}

func TestToolFindsAndSkips(t *testing.T) {
	if p := Tool(t, "sh", "any POSIX system has it"); p == "" {
		t.Fatal("Tool found no path for sh")
	}
	var sub *testing.T
	t.Run("missing", func(t *testing.T) {
		sub = t
		t.Setenv("CI", "")
		Tool(t, "narwhal-no-such-tool", "not installable")
		t.Error("Tool returned for a missing program outside CI; it should skip")
	})
	if !sub.Skipped() {
		t.Error("a missing tool outside CI did not skip the test")
	}
}

// recordTB keeps the failures a helper reports instead of failing.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestMentionsReportsEachMissingWant(t *testing.T) {
	r := &recordTB{TB: t}
	Mentions(r, "stdout", "alpha beta", "alpha", "gamma", "beta", "delta")
	want := []string{"stdout lacks \"gamma\":\nalpha beta", "stdout lacks \"delta\":\nalpha beta"}
	if !slices.Equal(r.errs, want) {
		t.Errorf("failures %q, want %q", r.errs, want)
	}
}

func TestReturnsWhileHeld(t *testing.T) {
	var mu sync.Mutex
	ReturnsWhileHeld(t, "a lock-free call", &mu, func() {})
	r := &recordTB{TB: t}
	n := 0
	ReturnsWhileHeld(r, "a locking call", &mu, func() { mu.Lock(); n++; mu.Unlock() })
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "a locking call blocked") || n != 1 {
		t.Fatalf("errors %q, want one naming the locking call", r.errs)
	}
}

func (r *recordTB) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Second, time.Millisecond, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
	r := &recordTB{TB: t}
	Eventually(r, 20*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "waiting for never") {
		t.Fatalf("errors %q, want one naming what never held", r.errs)
	}
}
