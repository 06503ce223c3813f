package avail

import (
	"testing"
)

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
