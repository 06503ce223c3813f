package router

import (
	"context"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Failover: a leg whose engine could not be reached at all (a connect
// error: refused, unroutable, connect timeout) never started any work, so
// no KV moved and no output exists. It moves to another engine of the
// role within the same attempt, whatever serving.max_attempts says, at no
// retry credit. A leg that reached its engine and failed is retried only
// as a whole new attempt (serving.max_attempts > 1), because a decode
// engine that received a handoff may already have consumed it.

// neverReached reports whether e is a failure to connect to the engine.
func neverReached(e *vllm.Error) bool { return e != nil && e.Reason == vllm.ReasonUnreachable }

// failover records a failed leg on iid that may move to another engine and
// excludes iid for the rest of the call; false when it may not.
func (c *call) failover(ctx context.Context, n int, phase string, e *vllm.Error, exclude map[string]bool, iid string) bool {
	if ctx.Err() != nil || c.clientGone || c.committed || !neverReached(e) {
		return false
	}
	c.r.attemptFailed(phase, e.Reason)
	exclude[iid] = true
	c.recordFailure(n, phase, e, 0, journal.RetryFailover)
	c.failedOver = true // a re-placement is not a new admission: no TTFT check
	return true
}
