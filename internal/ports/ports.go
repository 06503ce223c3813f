// Package ports is the determinism boundary of ADR-006: every package that
// calls its results deterministic gets wall-clock time, identifiers and
// randomness only through these interfaces, so tests and the simulator can
// replace them with fakes that replay byte for byte.
package ports

import (
	"time"
)

// Clock tells the time and makes timers. Live code uses System; tests and
// the simulator use a Fake that only moves when told to.
type Clock interface {
	Now() time.Time
	// After delivers the clock's time once d has elapsed on this clock.
	After(d time.Duration) <-chan time.Time
	// NewTicker ticks every d on this clock until stopped.
	NewTicker(d time.Duration) Ticker
	// NewTimer fires once after d on this clock unless stopped.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has elapsed on this
	// clock, unless stopped first. Unlike a Timer read by a waiting
	// goroutine, nothing runs until it fires; its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Ticker is the part of time.Ticker that callers use.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Timer is the part of time.Timer that callers use.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
}

// IDGenerator hands out identifiers that are unique for the life of the
// process (System) or reproducible from a seed (Sequential, Seeded).
type IDGenerator interface {
	NewID() string
}

// Rng is the randomness a deterministic package may use. Implementations
// are not safe for concurrent use unless they say so.
type Rng interface {
	Float64() float64
	// IntN returns a value in [0, n); n must be positive.
	IntN(n int) int
	Uint64() uint64
	NormFloat64() float64
	ExpFloat64() float64
}
