package ports

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// System is the real clock.
type System struct{}

// SystemClock returns the wall clock.
func SystemClock() Clock { return System{} }

func (System) Now() time.Time                         { return time.Now() }
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (System) NewTicker(d time.Duration) Ticker       { return systemTicker{time.NewTicker(d)} }
func (System) NewTimer(d time.Duration) Timer         { return systemTimer{time.NewTimer(d)} }
func (System) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTicker struct{ t *time.Ticker }

func (s systemTicker) C() <-chan time.Time { return s.t.C }
func (s systemTicker) Stop()               { s.t.Stop() }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }

// RandomIDs returns 128-bit random identifiers in lower-case hex, the
// production IDGenerator.
func RandomIDs() IDGenerator { return randomIDs{} }

type randomIDs struct{}

func (randomIDs) NewID() string {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; if it ever does, an id that
		// could collide is worse than stopping.
		panic("ports: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// NewSeededRng returns a PCG generator: the same seed gives the same stream
// on every platform and Go release that keeps math/rand/v2's PCG.
func NewSeededRng(seed uint64) Rng {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
