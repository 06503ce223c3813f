package sched

// controller holds role-control state between evaluations.
type controller struct {
	c *Core
}

func newController(c *Core) *controller { return &controller{c: c} }

// arrival records a sized request for the demand model.
func (k *controller) arrival(at float64, r *Request) {}

// Tick is one monitor pass at now: it closes the interval windows and, with
// a controller policy, evaluates role control. It returns the evaluations
// it made (none when it had nothing to decide).
func (c *Core) Tick(now float64) []Decision {
	c.Roll(now)
	return nil
}

// Flips returns the role-change history, oldest first (at most
// controller.flip_history records).
func (c *Core) Flips() []Flip { return nil }
