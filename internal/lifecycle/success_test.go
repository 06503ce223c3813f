package lifecycle

import (
	"testing"
)

// A leg's success on an engine with nothing to clear has nothing to do
// (Marked is false: the owner takes no lock for it, avail's
// TestLegSucceededLockFreeWhenClean); one that follows a failure clears
// the streak, after which the engine is clean again.
func TestSuccessLockFreeWhenClean(t *testing.T) {
	for _, kind := range []string{"prefill", "decode", "answered"} {
		m := New(testFleet(false))
		if m.Marked("d0") || m.Marked("zz") {
			t.Fatalf("%s: a clean or unknown engine is marked", kind)
		}
		m.Failure("d0", Connection)
		if m.Streaks()["d0"][Connection] != 1 || !m.engines["d0"].marked.Load() {
			t.Fatalf("%s: a failure did not mark the engine", kind)
		}
		m.Success("d0", kind)
		if n := m.Streaks()["d0"][Connection]; n != 0 || m.engines["d0"].marked.Load() {
			t.Fatalf("%s: streak %d after a success, marked %v; want cleared", kind, n, m.engines["d0"].marked.Load())
		}
		if m.Marked("d0") {
			t.Fatalf("%s: marked once clean again", kind)
		}
	}
}

// A success that clears only some classes keeps the engine marked while
// another class's streak stands.
func TestSuccessKeepsOtherStreaksMarked(t *testing.T) {
	m := New(testFleet(false))
	m.Failure("d0", Timeout) // "prefill" does not clear timeouts
	m.Success("d0", "prefill")
	if m.Streaks()["d0"][Timeout] != 1 || !m.engines["d0"].marked.Load() {
		t.Fatal("a timeout streak was lost or unmarked by a prefill success")
	}
	m.Success("d0", "health")
	if m.Streaks()["d0"][Timeout] != 0 || m.engines["d0"].marked.Load() {
		t.Fatal("a health success did not clear the timeout streak")
	}
}
