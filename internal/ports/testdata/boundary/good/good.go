// Package good is a fixture for the determinism-boundary scanner: the
// same names used without reaching the clock, environment or randomness.
package good

import (
	"os"
	"time"
)

type clock interface{ Now() time.Time }

func f(c clock, d time.Duration) (time.Time, error) {
	_, err := os.ReadFile("x")
	return c.Now().Add(d).Truncate(time.Second), err
}
