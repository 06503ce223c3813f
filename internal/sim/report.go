package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// JSON is the results document, indented, with a final newline. Go's
// encoder writes struct fields in declaration order, sorts map keys and
// formats floats canonically, so the same results give the same bytes.
func (r *Results) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sim: encode results: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteTable prints attainment per arm and rate, the sustained rate and
// flips, then the adaptive-versus-static line.
func (r *Results) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.headline())
	fmt.Fprintf(&b, "SLO attainment %% by offered rate (req/s); sustained = highest rate at ≥ %s%%\n\n", pct(r.Target))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "arm\t")
	for _, rate := range r.Rates {
		fmt.Fprintf(tw, "%s\t", num(rate))
	}
	fmt.Fprint(tw, "sustained\tflips\t\n")
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t", a.Name)
		for _, run := range a.Runs {
			fmt.Fprintf(tw, "%s\t", pct(run.Attainment))
		}
		fmt.Fprintf(tw, "%s\t%d\t\n", sustained(a.SustainedRPS), a.Flips)
	}
	tw.Flush()
	if r.Cache != nil {
		fmt.Fprintf(&b, "\n%s", r.Cache.Line())
	} else {
		fmt.Fprintf(&b, "\n%s\n", r.Comparison.Line())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Results) headline() string {
	t := r.Trace
	var shape string
	if t.Source == "replay" {
		shape = fmt.Sprintf("replayed trace (%s s at the first rate)", num(t.DurationS))
	} else if s := t.Sessions; s != nil {
		sharing := fmt.Sprintf("%d system prompts of %d tokens", s.Systems, s.SystemLen)
		if s.NoSharing {
			sharing = "no sharing"
		}
		shape = fmt.Sprintf("multi-turn sessions over %s s (%s, %s turns)", num(s.DurationS), sharing, num(s.TurnsMean))
	} else {
		var names []string
		for _, s := range t.Segments {
			names = append(names, fmt.Sprintf("%s %s s", s.Name, num(s.DurationS)))
		}
		shape = "trace " + strings.Join(names, " → ")
	}
	return fmt.Sprintf("%d engines, %s, seed %d, SLO TTFT %s s / TPOT %s s",
		r.Fleet.Engines, shape, r.Seed, num(r.Fleet.SLO.TTFT), num(r.Fleet.SLO.TPOT))
}

// Line is the one-sentence verdict make demo ends with.
func (c Comparison) Line() string {
	if c.BestStatic == "" {
		return fmt.Sprintf("adaptive sustains %s; no static split was run", sustainedPhrase(c.AdaptiveRPS))
	}
	verdict := "adaptive matches or beats the best static split"
	if !c.Holds {
		verdict = "adaptive does NOT reach the best static split"
	}
	return fmt.Sprintf("adaptive sustains %s; the best static split, %s, sustains %s: %s",
		sustainedPhrase(c.AdaptiveRPS), c.BestStatic, sustainedPhrase(c.BestStaticRPS), verdict)
}

func sustainedPhrase(rps float64) string {
	if rps <= 0 {
		return "no swept rate"
	}
	return num(rps) + " req/s"
}

func sustained(rps float64) string {
	if rps <= 0 {
		return "-"
	}
	return num(rps)
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) }

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
