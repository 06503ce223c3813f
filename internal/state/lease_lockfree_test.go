package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Valid answers from the published fence, never taking mu: before a
// claim, while held, past ttl − margin by the local clock, after a
// renewal and after Release.
func TestLeaseValidTakesNoLock(t *testing.T) {
	clk := ports.NewFake(t0)
	l := newLease(t, filepath.Join(t.TempDir(), "lease"), "a", clk, 1)
	valid := func(want bool, when string) {
		t.Helper()
		var got bool
		testkit.ReturnsWhileHeld(t, "Valid "+when, &l.mu, func() { got = l.Valid() })
		if got != want {
			t.Fatalf("Valid %s = %v, want %v", when, got, want)
		}
	}
	valid(false, "before a claim")
	if _, err := l.Claim(); err != nil {
		t.Fatal(err)
	}
	valid(true, "after the claim")
	clk.Advance(ttl - margin)
	valid(false, "at ttl − margin")
	if err := l.Renew(); err != nil {
		t.Fatal(err)
	}
	valid(true, "after a renewal")
	clk.Advance(time.Second)
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	valid(false, "after Release")
}
