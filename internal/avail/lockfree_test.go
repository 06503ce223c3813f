package avail

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// A leg's success on an engine with nothing to clear takes no lock (the
// request path reports every leg); one after a failure takes avail's
// lock and clears the streak, after which the engine is lock-free again.
func TestLegSucceededLockFreeWhenClean(t *testing.T) {
	f := newFixture(t, 0, fakeProbes{})
	for _, kind := range []string{"prefill", "decode"} {
		testkit.ReturnsWhileHeld(t, kind+" success on a clean engine", &f.s.pub.mu, func() { f.s.LegSucceeded("d0", kind) })
		testkit.ReturnsWhileHeld(t, kind+" success on an unknown engine", &f.s.pub.mu, func() { f.s.LegSucceeded("zz", kind) })
	}
	f.s.failed("d1", lifecycle.Connection)
	f.s.LegSucceeded("d1", "decode")
	if n := f.s.View().Streaks()["d1"][lifecycle.Connection]; n != 0 {
		t.Fatalf("connection streak %d after a decode success, want 0", n)
	}
	testkit.ReturnsWhileHeld(t, "success once clean again", &f.s.pub.mu, func() { f.s.LegSucceeded("d1", "decode") })
}

// The request path's readiness check reads the degraded reason PassEnded
// published: degraded at the failure limit, "" again after a clean pass.
// (monitoring has no lock to take: TestNoLockAroundIO counts them.)
func TestDegradedReasonTakesNoLock(t *testing.T) {
	f := newFixture(t, 0, fakeProbes{})
	for range f.s.cfg.Controller.MonitorFailureLimit {
		f.s.PassEnded([]string{"handoff io"})
	}
	for _, want := range []string{"monitoring degraded: handoff io", ""} {
		if got := f.s.DegradedReason(); got != want {
			t.Fatalf("DegradedReason = %q, want %q", got, want)
		}
		f.s.PassEnded(nil)
	}
}
