package httpguard

import "time"

// Options bound what one client connection can hold on to. Zero fields
// take the defaults (docs/router.md, "Slow and idle clients").
type Options struct {
	// BodyReadTimeout bounds reading one request's body, never past
	// serving.request_timeout_s. Default 5 s.
	BodyReadTimeout time.Duration
	// BodyGrace is how long a completion body may take to arrive before
	// it counts as slow. A body that arrives within it (any SDK's, sent
	// in one go) never takes a slow-body slot, so clients that share an
	// address with a slow one (NAT, a proxy) are not refused for it.
	// Default 100 ms.
	BodyGrace time.Duration
	// BodyReadsPerClient caps the slow completion bodies (still arriving
	// after BodyGrace) being read at once from one remote IP address.
	// Default 8.
	BodyReadsPerClient int
	// SlowBodies caps the slow completion bodies being read at once from
	// every client together, so many addresses cannot add up to an
	// unbounded number of buffers. Default 256.
	SlowBodies int
	// ReadHeaderTimeout bounds reading a request's headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default 90 s.
	IdleTimeout time.Duration
	// FeedWriteTimeout bounds writing one dashboard feed event; a viewer
	// that stops reading is dropped within it. Default 10 s.
	FeedWriteTimeout time.Duration
	// FeedsPerClient caps the dashboard feeds open at once from one
	// remote IP address. Default 4.
	FeedsPerClient int
	// Feeds caps the dashboard feeds open at once in all. Default 64.
	Feeds int
}

// Defaults of Options.
const (
	DefaultBodyReadTimeout    = 5 * time.Second
	DefaultBodyGrace          = 100 * time.Millisecond
	DefaultBodyReadsPerClient = 8
	DefaultSlowBodies         = 256
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultIdleTimeout        = 90 * time.Second
	DefaultFeedWriteTimeout   = 10 * time.Second
	DefaultFeedsPerClient     = 4
	DefaultFeeds              = 64
)

// WithDefaults fills the zero fields with the defaults.
func (o Options) WithDefaults() Options {
	o.BodyReadTimeout = orDuration(o.BodyReadTimeout, DefaultBodyReadTimeout)
	o.BodyGrace = orDuration(o.BodyGrace, DefaultBodyGrace)
	o.ReadHeaderTimeout = orDuration(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	o.IdleTimeout = orDuration(o.IdleTimeout, DefaultIdleTimeout)
	o.FeedWriteTimeout = orDuration(o.FeedWriteTimeout, DefaultFeedWriteTimeout)
	o.BodyReadsPerClient = orCount(o.BodyReadsPerClient, DefaultBodyReadsPerClient)
	o.SlowBodies = orCount(o.SlowBodies, DefaultSlowBodies)
	o.FeedsPerClient = orCount(o.FeedsPerClient, DefaultFeedsPerClient)
	o.Feeds = orCount(o.Feeds, DefaultFeeds)
	return o
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func orCount(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}
