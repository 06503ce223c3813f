package residency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// NewEpoch is a random per-sidecar-process epoch.
func NewEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Follow keeps x fed from the engine's events until ctx ends: it
// subscribes, and after any failure marks residency unknown and
// resubscribes after retry.
func Follow(ctx context.Context, sub kvevents.Subscriber, x *Index, retry time.Duration) {
	for ctx.Err() == nil {
		err := sub.Run(ctx, x)
		if ctx.Err() != nil {
			return
		}
		x.Lose("cache event subscription failed: " + err.Error())
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
