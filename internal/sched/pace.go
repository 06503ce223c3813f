package sched

import "math"

// Pace is one engine's decode pace over the monitor interval that is
// closing (since the last Tick): the drift tracker's input. The residual
// compares what the engine did with what its profile says it should do
// with the work it holds.
type Pace struct {
	IID  string
	Live bool
	// Resident is the decode requests on the engine now.
	Resident int
	// MeanGap is the interval's mean per-token decode gap; Gaps is the
	// tokens behind it (0: no gap was observed).
	MeanGap float64
	Gaps    int
	// StalledGap is the longest silence, up to now, of a resident decode
	// request that already produced a token: a stalled engine has no gaps
	// to average, only this.
	StalledGap float64
	// Expected is the profile's token_interval(resident tokens, requests).
	Expected float64
	// PrefillPaused: prefill work was resident on the engine during the
	// interval, so its decode gaps cross a prefill boundary.
	PrefillPaused bool
}

// Residual is max(mean gap, stalled gap) / expected interval; ok is false
// when the interval holds nothing to score.
func (p Pace) Residual() (float64, bool) {
	if p.Resident == 0 || p.Expected <= 0 || (p.Gaps == 0 && p.StalledGap <= 0) {
		return 0, false
	}
	r := math.Max(p.MeanGap, p.StalledGap) / p.Expected
	return r, finite(r)
}

// DecodePace reports every engine's pace at now, in iid order. Call it
// before Tick, which closes the interval.
func (c *Core) DecodePace(now float64) []Pace {
	out := make([]Pace, 0, len(c.instances))
	for _, i := range c.instances {
		p := Pace{IID: i.IID, Live: i.Live, Resident: len(i.decode),
			PrefillPaused: len(i.prefill) > 0 || i.win.priceInteg > 0}
		p.MeanGap, _ = i.win.meanGap()
		p.Gaps = i.win.gapTokens
		for _, r := range i.decode {
			if r.sawToken {
				p.StalledGap = math.Max(p.StalledGap, now-r.lastToken)
			}
		}
		if p.Resident > 0 {
			p.Expected = i.prof.TokenInterval(i.decodeTokens, p.Resident)
		}
		out = append(out, p)
	}
	return out
}

// SetProbation puts an engine on drift probation (its prices carry
// recovery.health.probation_penalty_s) or takes it off.
func (c *Core) SetProbation(iid string, on bool) {
	if i := c.byIID[iid]; i != nil && i.Probation != on {
		i.Probation = on
		c.log(Step{Kind: StepSetProbation, IID: iid, On: on})
	}
}
