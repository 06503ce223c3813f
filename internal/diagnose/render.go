package diagnose

import (
	"fmt"
	"strings"
)

// RemedyText renders a remedy for a terminal: each ranked correction as a
// diff against the broken plan with its command, basis, trade-offs,
// violations and derived result, then the operator actions, needs and
// notes. apps, when given, are the applications written for the
// corrections (same order): their ids and results are shown. Every line is
// built from typed values and the rules' own words; no log text reaches it.
func RemedyText(rem Remedy, apps []Application) string {
	var b strings.Builder
	if rem.Rule.ID != "" {
		fmt.Fprintf(&b, "rule: %s v%d (%s)\n", rem.Rule.ID, rem.Rule.Version, rem.Rule.Status)
	}
	if len(rem.Corrections) == 0 {
		b.WriteString("corrections: none computed\n")
	}
	for i, c := range rem.Corrections {
		result := ResultUnverified
		id := ""
		if i < len(apps) {
			result, id = apps[i].Result(), " application "+apps[i].ApplicationID
		}
		fmt.Fprintf(&b, "correction %d%s: %s\n", i+1, id, result)
		for _, ch := range c.Changes {
			fmt.Fprintf(&b, "  %s\n", ch)
		}
		if c.RequiresArtifact {
			b.WriteString("  (needs a different checkpoint: no plan field expresses it)\n")
		}
		if cmd, err := c.Plan.Command(); err == nil {
			fmt.Fprintf(&b, "  command: %s\n", cmd)
		}
		writeList(&b, "basis", c.Basis)
		for _, t := range c.TradeOffs {
			fmt.Fprintf(&b, "  trade-off (%s): %s\n", t.Kind, t.Text)
		}
		for _, v := range c.Violations {
			fmt.Fprintf(&b, "  violates %s: %s\n", v.Requirement, v.Text)
		}
		for _, r := range c.Risks {
			fmt.Fprintf(&b, "  at risk: %s (a serving trial decides)\n", r)
		}
		for _, n := range c.Unchecked {
			fmt.Fprintf(&b, "  unchecked %s: %s\n", n.What, n.Why)
		}
	}
	for _, a := range rem.Actions {
		fmt.Fprintf(&b, "action (%s): %s\n", a.Kind, a.Text)
	}
	for _, n := range rem.Needs {
		fmt.Fprintf(&b, "needs %s %s: %s\n", n.Kind, n.What, n.Why)
	}
	for _, n := range rem.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

func writeList(b *strings.Builder, label string, items []string) {
	for _, s := range items {
		fmt.Fprintf(b, "  %s: %s\n", label, s)
	}
}
