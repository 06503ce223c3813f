// Package bad is a fixture for the determinism-boundary scanner: one of
// each violation it must find.
package bad

import (
	crand "crypto/rand"
	"math/rand/v2"
	goos "os"
	"time"

	"github.com/google/uuid"
)

func f() {
	_ = time.Now()
	_ = time.Since(time.Time{})
	time.Sleep(0)
	<-time.After(0)
	_ = goos.Getenv("X")
	_, _ = goos.LookupEnv("X")
	_ = rand.IntN(3)
	_, _ = crand.Read(nil)
	_ = uuid.New()
}
