package httpguard

import "time"

// Options bound what one client connection can hold on to. Zero fields
// take the defaults (docs/router.md, "Slow and idle clients").
type Options struct {
	// BodyReadTimeout bounds reading one completion request's body, never
	// past serving.request_timeout_s. Default 5 s.
	BodyReadTimeout time.Duration
	// BodyReadsPerClient caps the completion bodies being read at once from
	// one remote IP address. Default 8.
	BodyReadsPerClient int
	// ReadHeaderTimeout bounds reading a request's headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default 90 s.
	IdleTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultBodyReadTimeout    = 5 * time.Second
	DefaultBodyReadsPerClient = 8
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultIdleTimeout        = 90 * time.Second
)

// WithDefaults fills the zero fields with the defaults.
func (o Options) WithDefaults() Options {
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.BodyReadsPerClient <= 0 {
		o.BodyReadsPerClient = DefaultBodyReadsPerClient
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return o
}
