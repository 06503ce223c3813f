package sim

import (
	"fmt"
	"testing"
)

// A request's ids are the r%07d name and its legs' /p and /d, at every
// width of the index.
func TestRequestIDs(t *testing.T) {
	for _, idx := range []int{0, 7, 1234567, 12345678, 9876543210} {
		rid, p, d := requestIDs(idx)
		want := fmt.Sprintf("r%07d", idx)
		if rid != want || p != want+"/p" || d != want+"/d" {
			t.Errorf("requestIDs(%d) = %q %q %q, want %q and its /p, /d", idx, rid, p, d, want)
		}
	}
}
