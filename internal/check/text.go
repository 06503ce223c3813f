package check

import (
	"fmt"
	"io"
)

var prefixes = map[Status]string{OK: "  ok    ", Fail: "  FAIL  ", Skip: "  SKIP  ", Warn: "  WARN  "}

// WriteText prints the report the way operators read it: a header, each
// gate with its result lines, and one summary line.
func WriteText(w io.Writer, r *Report) {
	fmt.Fprintf(w, "fleet: %d engines, model %s\n", r.Engines, r.Model)
	fmt.Fprintf(w, "slo:   ttft <= %gs, tpot <= %gs\n", r.TTFT, r.TPOT)
	for _, g := range r.Gates {
		fmt.Fprintf(w, "%s: %s\n", g.Name, g.Outcome)
		for _, l := range g.Lines {
			fmt.Fprintf(w, "%s%s\n", prefixes[l.Status], l.Message)
		}
	}
	fmt.Fprintln(w, r.Summary())
}

// Summary is the last line of the text output.
func (r *Report) Summary() string {
	switch {
	case len(r.Failed) > 0:
		return fmt.Sprintf("%d gate(s) failed, %d skipped", len(r.Failed), len(r.Skipped))
	case len(r.Skipped) > 0:
		return fmt.Sprintf("all gates pass, %d skipped", len(r.Skipped))
	}
	return "all gates pass"
}
