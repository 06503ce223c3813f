package httpguard

import (
	"testing"
	"time"
)

func TestOptionsWithDefaults(t *testing.T) {
	got := Options{BodyReadsPerClient: 3, IdleTimeout: -time.Second, FeedWriteTimeout: time.Second, Feeds: 2}.WithDefaults()
	want := Options{BodyReadTimeout: DefaultBodyReadTimeout, BodyGrace: DefaultBodyGrace, BodyReadsPerClient: 3,
		SlowBodies: DefaultSlowBodies, ReadHeaderTimeout: DefaultReadHeaderTimeout, IdleTimeout: DefaultIdleTimeout,
		FeedWriteTimeout: time.Second, FeedsPerClient: DefaultFeedsPerClient, Feeds: 2}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}
