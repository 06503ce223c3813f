package diagnose

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
)

// overlay keeps the operator's data/expert-parallel layout and lays a
// plan's set layout over it; a plan that sets neither leaves it alone.
func TestOverlayParallelLayout(t *testing.T) {
	cases := []struct {
		name     string
		base, on memory.LaunchConfig
		dp       int
		ep       bool
	}{
		{"kept", memory.LaunchConfig{DP: 8, EnableExpertParallel: true}, memory.LaunchConfig{TP: 2}, 8, true},
		{"set", memory.LaunchConfig{}, memory.LaunchConfig{DP: 4, EnableExpertParallel: true}, 4, true},
		{"none", memory.LaunchConfig{}, memory.LaunchConfig{}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := overlay(c.base, c.on)
			if l.DP != c.dp || l.EnableExpertParallel != c.ep {
				t.Errorf("dp %d ep %v, want dp %d ep %v", l.DP, l.EnableExpertParallel, c.dp, c.ep)
			}
		})
	}
}
