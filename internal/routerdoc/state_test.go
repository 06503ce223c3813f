package routerdoc

import (
	"reflect"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// A clone shares no map with the counters it came from: the state
// document reads it after the router's mutex is released.
func TestCountsClone(t *testing.T) {
	var c Counts
	c.Count(journal.TerminalFailed, "engine_timeout")
	c.AttemptFailed("prefill", "engine_timeout")
	k := c.Clone()
	c.Count(journal.TerminalFailed, "engine_timeout")
	c.AttemptFailed("prefill", "engine_timeout")
	if k.Failed != 1 || k.Reasons["failed"]["engine_timeout"] != 1 || k.AttemptFailures[[2]string{"prefill", "engine_timeout"}] != 1 {
		t.Errorf("clone moved with the original: %+v", k)
	}
	if c.Failed != 2 || c.Reasons["failed"]["engine_timeout"] != 2 {
		t.Errorf("original %+v, want two failures", c)
	}
}

// Every terminal counts in its own field; reasons of terminals the state
// document does not list stay out of outcome_reasons.
func TestCountsCount(t *testing.T) {
	var c Counts
	for _, terminal := range []string{journal.TerminalCompleted, journal.TerminalFailed, journal.TerminalExpired,
		journal.TerminalCancelled, journal.TerminalInvalid, journal.TerminalRefused, journal.TerminalRejected} {
		c.Count(terminal, "")
	}
	c.Count(journal.TerminalRejected, string(fault.Saturated))
	c.Count(journal.TerminalCancelled, "client")
	if c.Served != 1 || c.Failed != 1 || c.Expired != 1 || c.Cancelled != 2 || c.Invalid != 1 || c.Refused != 1 || c.Rejected != 2 {
		t.Errorf("counts %+v", c)
	}
	want := map[string]map[string]int{"failed": {}, "refused": {}, "rejected": {string(fault.Saturated): 1}, "expired": {}}
	if got := OutcomeReasons(c.Reasons); !reflect.DeepEqual(got, want) {
		t.Errorf("outcome reasons %v, want %v", got, want)
	}
}

// The handoff form carries every counter it has a field for, and back.
func TestCountsHandoffRoundTrip(t *testing.T) {
	c := Counts{Offered: 9, UnsizedOffered: 1, Served: 5, SLOMet: 4, Failed: 1, Expired: 1, Cancelled: 1, Invalid: 1,
		Refused: 1, Rejected: 1, Reasons: map[string]map[string]int{"failed": {"engine_timeout": 1}}}
	h := c.Handoff(3)
	if h.Unserved != 3 || h.InvalidRequests != 1 || h.Offered != 9 {
		t.Errorf("handoff counters %+v", h)
	}
	var back Counts
	back.Restore(h, c.Reasons)
	if !reflect.DeepEqual(back, c) {
		t.Errorf("restored %+v, want %+v", back, c)
	}
}
