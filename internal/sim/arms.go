package sim

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/sched"
)

// Arm is one way of running the fleet.
type Arm struct {
	Name string `json:"name"`
	// Policy is who changes roles: static, reactive (our controller) or
	// arrow (the paper's Algorithms 1–3).
	Policy string `json:"policy"`
	// Prefill engines at the start; the rest decode.
	Prefill int `json:"prefill"`
	// Aggregated engines serve both legs of every request themselves.
	Aggregated bool `json:"aggregated"`
	// CacheAware gives the core each engine's resident prefix (warm
	// prefill pricing); without it every prefill is priced cold.
	CacheAware bool `json:"cache_aware,omitempty"`
	// NoQueue turns the core's deadline queue off: a first placement the
	// admission checks refuse is refused at once (the arm to compare with).
	NoQueue bool `json:"no_queue,omitempty"`
}

// Static is the fixed kPnD split.
func Static(k, n int) Arm {
	return Arm{Name: fmt.Sprintf("%dP%dD", k, n-k), Policy: "static", Prefill: k}
}

// Aggregated is every engine doing both phases.
func Aggregated(n int) Arm {
	return Arm{Name: "aggregated", Policy: "static", Prefill: n / 2, Aggregated: true}
}

// Adaptive is narwhal's reactive controller, starting from an even split.
func Adaptive(n int) Arm {
	return Arm{Name: "adaptive", Policy: "reactive", Prefill: max(1, n/2)}
}

// Arrow is the Arrow paper's policy, starting from an even split.
func Arrow(n int) Arm {
	return Arm{Name: "arrow", Policy: "arrow", Prefill: max(1, n/2)}
}

// AllArms is every static split kPnD for k = 1..n−1, then aggregated,
// adaptive and arrow. A one-engine fleet has only the aggregated arm.
func AllArms(n int) []Arm {
	var arms []Arm
	for k := 1; k < n; k++ {
		arms = append(arms, Static(k, n))
	}
	arms = append(arms, Aggregated(n))
	if n >= 2 {
		arms = append(arms, Adaptive(n), Arrow(n))
	}
	return arms
}

// options are the core options the arm runs with.
func (a Arm) options(base sched.Options) (sched.Options, error) {
	switch a.Policy {
	case "static":
		base.Policy = sched.PolicyStatic
	case "reactive":
		base.Policy = sched.PolicyReactive
	case "arrow":
		base.Policy = sched.PolicyArrow
	default:
		return base, fmt.Errorf("sim: arm %s: unknown policy %q: use static, reactive or arrow", a.Name, a.Policy)
	}
	base.Aggregated = a.Aggregated
	if a.NoQueue {
		base.Queue = sched.QueueLimits{}
	}
	return base, nil
}
