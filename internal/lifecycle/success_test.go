package lifecycle

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// A leg's success on an engine with nothing to clear takes no lock; one
// that follows a failure takes it and clears the streak, after which the
// engine is clean (lock-free) again.
func TestSuccessLockFreeWhenClean(t *testing.T) {
	for _, kind := range []string{"prefill", "decode", "answered"} {
		m := New(testFleet(false))
		testkit.ReturnsWhileHeld(t, kind+" success on a clean engine", &m.mu, func() { m.Success("d0", kind) })
		testkit.ReturnsWhileHeld(t, kind+" success on an unknown engine", &m.mu, func() { m.Success("zz", kind) })
		m.Failure("d0", Connection)
		if m.Streaks()["d0"][Connection] != 1 || !m.engines["d0"].marked.Load() {
			t.Fatalf("%s: a failure did not mark the engine", kind)
		}
		m.Success("d0", kind)
		if n := m.Streaks()["d0"][Connection]; n != 0 || m.engines["d0"].marked.Load() {
			t.Fatalf("%s: streak %d after a success, marked %v; want cleared", kind, n, m.engines["d0"].marked.Load())
		}
		testkit.ReturnsWhileHeld(t, kind+" success once clean again", &m.mu, func() { m.Success("d0", kind) })
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
