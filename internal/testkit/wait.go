package testkit

import (
	"sync"
	"testing"
	"time"
)

// ReturnsWhileHeld fails t unless f returns while mu is held by the test:
// the proof that a request-path call takes no lock mu guards (a call that
// took it would block until the deadline).
func ReturnsWhileHeld(t testing.TB, what string, mu sync.Locker, f func()) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Errorf("%s blocked on a held lock: the request path must not take it", what)
		mu.Unlock()
		<-done // let f finish before the deferred Unlock runs again
		mu.Lock()
	}
}

// Eventually polls cond every poll until it holds, failing t (naming
// what) once within has passed: it bounds a test, it asserts no timing.
func Eventually(t testing.TB, within, poll time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(poll) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
			return
		}
	}
}
