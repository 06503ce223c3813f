package fleet

import (
	"slices"
	"testing"
)

func TestIIDsAreSorted(t *testing.T) {
	for _, tc := range []struct {
		engines []string
		want    []string
	}{
		{nil, []string{}},
		{[]string{"p0"}, []string{"p0"}},
		{[]string{"p1", "d0", "p0", "d1"}, []string{"d0", "d1", "p0", "p1"}},
	} {
		var c Config
		for _, iid := range tc.engines {
			c.Engines = append(c.Engines, Engine{IID: iid})
		}
		if got := c.IIDs(); !slices.Equal(got, tc.want) {
			t.Errorf("IIDs of %v = %v, want %v", tc.engines, got, tc.want)
		}
	}
}
