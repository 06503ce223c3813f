package residency

import (
	"context"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/units"
)

// ForFleet is the router's tracker over cfg's sidecars, or nil when the
// fleet prices every prefill cold (runtime reference §2.3): no engine has
// a sidecar, the fleet has no engine_contract (nothing proves the engines
// hash blocks alike), or speculative decoding is on.
func ForFleet(cfg *fleet.Config) *Tracker {
	k := cfg.EngineContract
	if k == nil || (k.SpeculativeConfig != "" && k.SpeculativeConfig != "disabled") {
		return nil
	}
	var src []Source
	for _, e := range cfg.Engines {
		if u := URLFromAttestation(e.AttestationURL); u != "" {
			src = append(src, Source{IID: e.IID, URL: u})
		}
	}
	if len(src) == 0 {
		return nil
	}
	return NewTracker(src, DefaultViewLimit, units.Seconds(cfg.Engine.HealthTimeoutS))
}

// Follow refreshes every view each interval until ctx ends (the residency
// loop of runtime reference §3.4), telling known each engine's state after
// every refresh, then closes the tracker.
func (t *Tracker) Follow(ctx context.Context, clock ports.Clock, every time.Duration, known func(iid string, known bool)) {
	defer t.Close()
	tick := clock.NewTicker(every)
	defer tick.Stop()
	for {
		t.Refresh(ctx)
		for iid, st := range t.State() {
			known(iid, st.Known)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}
