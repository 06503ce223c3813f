package sim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The deadline queue in simulation: the same arms with the core's queue
// on and off, on the moving trace gathered into bursts.

// QueueArms is adaptive and the even static split, each with the queue
// on (the default) and off.
func QueueArms(n int) []Arm {
	var arms []Arm
	for _, a := range []Arm{Adaptive(n), Static(max(1, n/2), n)} {
		off := a
		off.Name, off.NoQueue = a.Name+" no-queue", true
		arms = append(arms, a, off)
	}
	return arms
}

// QueuePair is one arm's runs with the queue on and off.
type QueuePair struct {
	Arm     string
	On, Off ArmResult
}

// QueuePairs pairs each "X no-queue" arm with X.
func (r *Results) QueuePairs() []QueuePair {
	var out []QueuePair
	for _, off := range r.Arms {
		if !off.NoQueue {
			continue
		}
		for _, on := range r.Arms {
			if !on.NoQueue && on.Name+" no-queue" == off.Name {
				out = append(out, QueuePair{Arm: on.Name, On: on, Off: off})
			}
		}
	}
	return out
}

// QueueHolds reports whether the queue is at least as good as none at
// every rate of every pair: attainment and goodput.
func (r *Results) QueueHolds() bool {
	for _, p := range r.QueuePairs() {
		for k := range p.On.Runs {
			if p.On.Runs[k].Attainment < p.Off.Runs[k].Attainment || p.On.Runs[k].GoodputRPS < p.Off.Runs[k].GoodputRPS {
				return false
			}
		}
	}
	return true
}

// WriteQueueTable prints, per arm and rate, attainment and goodput with
// the queue on and off, then whether on is at least as good everywhere.
func (r *Results) WriteQueueTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, bursts every %gs\n", r.headline(), r.Trace.BurstS)
	fmt.Fprint(&b, "deadline queue on vs off: SLO attainment % and goodput (met req/s) by offered rate (req/s)\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "arm\trate\tattain on\tattain off\tgoodput on\tgoodput off\trefused on\trefused off\t\n")
	for _, p := range r.QueuePairs() {
		for k, rate := range r.Rates {
			on, off := p.On.Runs[k], p.Off.Runs[k]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.2f\t%d\t%d\t\n", p.Arm, num(rate), pct(on.Attainment), pct(off.Attainment),
				on.GoodputRPS, off.GoodputRPS, on.Refused, off.Refused)
		}
	}
	tw.Flush()
	verdict := "the queue is at least as good as none at every rate"
	if !r.QueueHolds() {
		verdict = "the queue loses to none at some rate"
	}
	fmt.Fprintf(&b, "\n%s\n", verdict)
	_, err := io.WriteString(w, b.String())
	return err
}
