package report

import "github.com/narwhal-go/narwhal/internal/sim"

// FromSim turns a simulated sweep (narwhal demo) into runs, one per arm,
// so the demo's table gets the report's charts: attainment per offered
// rate for every arm, and for the arms that change roles the split over
// time at the sweep's middle rate. The simulator keeps no per-request
// latencies, so its runs have no CDFs.
func FromSim(res *sim.Results) []*Run {
	var runs []*Run
	slo := SLO{TTFT: res.Fleet.SLO.TTFT, TPOT: res.Fleet.SLO.TPOT}
	for _, a := range res.Arms {
		r := newRun(a.Name, "sim", slo, res.Target, 0)
		r.GoodputRPS = a.SustainedRPS
		for _, run := range a.Runs {
			r.Steps = append(r.Steps, Step{Rate: run.Rate, DurationS: run.SimulatedS, Offered: run.Offered,
				Met: run.Met, Refused: run.Refused, Attainment: run.Attainment})
			r.Counts.Offered += run.Offered
			r.Counts.Met += run.Met
			r.Counts.Refused += run.Refused
			for cause, n := range run.RefusedBy {
				r.Refusals["refused:"+cause] += n
			}
		}
		c := r.Counts
		r.Attainment.PerRequest = ratio(c.Met, c.Offered)
		r.Attainment.ExRefused = ratio(c.Met, c.Offered-c.Refused)
		if a.Policy != "static" && len(a.Runs) > 0 {
			mid := a.Runs[len(a.Runs)/2]
			r.WallS = mid.SimulatedS
			r.Control = simControl(mid)
		}
		runs = append(runs, r)
	}
	return runs
}

// simControl is a run's split timeline; each one-engine change of the
// prefill pool is a flip.
func simControl(run *sim.Result) Control {
	var c Control
	for i, s := range run.Splits {
		c.Splits = append(c.Splits, Split{At: s.At, Prefill: s.Prefill, Decode: s.Decode})
		if i == 0 {
			continue
		}
		to := "prefill"
		if s.Prefill < run.Splits[i-1].Prefill {
			to = "decode"
		}
		c.Flips = append(c.Flips, Flip{At: s.At, To: to})
	}
	c.Reversals = run.Reversals
	return c
}
