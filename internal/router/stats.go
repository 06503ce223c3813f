package router

import (
	"github.com/narwhal-go/narwhal/internal/journal"
)

// stats are the router's outcome counters, guarded by Router.mu. They
// back /narwhal/state; metrics mirror them.
type stats struct {
	offered, unsizedOffered                  int
	served, sloMet                           int
	failed, expired, cancelled, invalid      int
	refused, rejected                        int
	reasons                                  map[string]map[string]int // terminal → reason → n
	prefillAttempts, decodeAttempts, retries int
	servedAfterRetry, retryDenied            int
	credits, creditsSpent                    float64
	attemptFailures                          map[[2]string]int // (phase, reason) → n
	decodeTokens                             int
	upstreamPrefill, upstreamDecode          float64
	retainedHighWater                        int64
}

func (s *stats) count(terminal, reason string) {
	switch terminal {
	case journal.TerminalCompleted:
		s.served++
	case journal.TerminalFailed:
		s.failed++
	case journal.TerminalExpired:
		s.expired++
	case journal.TerminalCancelled:
		s.cancelled++
	case journal.TerminalInvalid:
		s.invalid++
	case journal.TerminalRefused:
		s.refused++
	case journal.TerminalRejected:
		s.rejected++
	}
	if reason == "" {
		return
	}
	if s.reasons == nil {
		s.reasons = map[string]map[string]int{}
	}
	if s.reasons[terminal] == nil {
		s.reasons[terminal] = map[string]int{}
	}
	s.reasons[terminal][reason]++
}

func (s *stats) attemptFailed(phase, reason string) {
	if s.attemptFailures == nil {
		s.attemptFailures = map[[2]string]int{}
	}
	s.attemptFailures[[2]string{phase, reason}]++
}
