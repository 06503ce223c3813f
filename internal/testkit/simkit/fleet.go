package simkit

import (
	"fmt"
	"testing"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// Fleet starts n simengines serving model "m" (engine i has FastRow("ei")
// and seed i; tweak, when not nil, adjusts its config first), each with a
// Sidecar, all closed when the test ends.
func Fleet(t testing.TB, n int, tweak func(i int, c *simengine.Config)) ([]*simengine.Engine, []*attest.Server) {
	t.Helper()
	var engines []*simengine.Engine
	var sidecars []*attest.Server
	for i := range n {
		c := simengine.Config{Model: "m", Profile: FastRow(fmt.Sprintf("e%d", i)), Seed: uint64(i)}
		if tweak != nil {
			tweak(i, &c)
		}
		e, err := simengine.Start(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		engines = append(engines, e)
		sidecars = append(sidecars, Sidecar(t, e, "127.0.0.1:0"))
	}
	return engines, sidecars
}
