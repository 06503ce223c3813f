package avail

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// The request path's readiness check reads the degraded reason without
// the monitoring lock, and the reason PassEnded published is what it
// reads: degraded at the failure limit, "" again after a clean pass.
func TestDegradedReasonTakesNoLock(t *testing.T) {
	f := newFixture(t, 0, fakeProbes{})
	for range f.s.cfg.Controller.MonitorFailureLimit {
		f.s.PassEnded([]string{"handoff io"})
	}
	for _, want := range []string{"monitoring degraded: handoff io", ""} {
		var got string
		testkit.ReturnsWhileHeld(t, "DegradedReason", &f.s.mon.mu, func() { got = f.s.DegradedReason() })
		if got != want {
			t.Fatalf("DegradedReason = %q, want %q", got, want)
		}
		f.s.PassEnded(nil)
	}
}
