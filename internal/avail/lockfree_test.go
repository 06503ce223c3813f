package avail

import (
	"go/ast"
	"go/token"
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

// lifecycleReads are the Manager methods that change nothing (Record
// changes who hears); Step and Ready are the only writes.
var lifecycleReads = map[string]bool{"Build": true, "Ejected": true, "Events": true, "Held": true, "Holds": true,
	"NextRelease": true, "ProcessStarts": true, "Quarantined": true, "Records": true, "Streaks": true,
	"Suspect": true, "Marked": true, "LiveSet": true, "Live": true, "Step": true, "Ready": true, "Record": true}

// avail changes the lifecycle core only with Step and Ready, so that the
// manager's history is a log of them that replays (lifecycle.Replay):
// every other call on the manager (through lockedLife's m or the
// supervisor's life) is a read.
func TestLifecycleChangesOnlyThroughStep(t *testing.T) {
	fset := token.NewFileSet()
	for _, f := range parseDir(t, fset, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); ok && (recv.Sel.Name == "m" || recv.Sel.Name == "life") && !lifecycleReads[sel.Sel.Name] {
				t.Errorf("%s: lifecycle.Manager.%s changes the core outside Step", fset.Position(c.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
