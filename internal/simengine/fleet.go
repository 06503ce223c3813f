package simengine

import (
	"errors"
	"fmt"
)

// Fleet is N engines started together, for tests and sim-fleet.
type Fleet struct {
	Engines []*Engine
}

// StartFleet starts n engines from base. Engine i gets Port and
// SideChannelPort 0 (free ports), EngineID "" (fresh), Seed base.Seed+i
// and, when each is given, each(i) is used instead of base.
func StartFleet(n int, base Config, each func(i int) Config) (*Fleet, error) {
	if n <= 0 {
		return nil, fmt.Errorf("simengine: a fleet needs at least one engine, got %d", n)
	}
	f := &Fleet{}
	for i := 0; i < n; i++ {
		c := base
		if each != nil {
			c = each(i)
		}
		c.Port, c.SideChannelPort, c.AdminPort = 0, 0, 0
		c.Seed = base.Seed + uint64(i)
		e, err := Start(c)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("simengine: fleet engine %d: %w", i, err)
		}
		f.Engines = append(f.Engines, e)
	}
	return f, nil
}

// URLs lists the engines' base URLs in order.
func (f *Fleet) URLs() []string {
	out := make([]string, len(f.Engines))
	for i, e := range f.Engines {
		out[i] = e.URL()
	}
	return out
}

// Close stops every engine.
func (f *Fleet) Close() error {
	var errs []error
	for _, e := range f.Engines {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}
