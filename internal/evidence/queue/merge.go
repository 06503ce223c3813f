package queue

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// merge groups candidates by fingerprint and scope, so two repositories
// holding the same bytes make one item, and assesses each group.
func merge(cands []Candidate, ev Evidence) []Item {
	groups := map[string][]Candidate{}
	var keys []string
	for _, c := range cands {
		k := c.DedupKey() + "\x00" + string(c.ClaimScope)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], c)
	}
	sort.Strings(keys)
	out := make([]Item, 0, len(keys))
	for _, k := range keys {
		out = append(out, assess(groups[k], ev))
	}
	return out
}

func assess(cs []Candidate, ev Evidence) Item {
	it := Item{DedupKey: cs[0].DedupKey(), ClaimScope: cs[0].ClaimScope}
	var failures []string
	for _, c := range cs {
		it.Names = appendNew(it.Names, c.Name)
		it.Sources = appendNew(it.Sources, c.Source)
		it.References = appendNew(it.References, c.Reference)
		it.Uncertainty = max(it.Uncertainty, c.Uncertainty)
		failures = append(failures, c.Failures...)
		it.Signals = append(it.Signals, c.Signals...)
	}
	slices.SortFunc(it.Sources, func(a, b Source) int { return sourceRank(a) - sourceRank(b) })
	sort.Strings(it.Names)
	sort.Strings(it.References)
	it.References = slices.DeleteFunc(it.References, func(s string) bool { return s == "" })
	it.Signals = dedupSignals(it.Signals)
	it.Breadth = breadth(it.Signals)
	it.FailureValue = unresolved(failures, ev.ResolvedFailures)
	it.Gap, it.GapReason = gapOf(it, ev)
	it.Eligible = it.Sources[0].direct() || it.Breadth >= 1 || len(origins(it.Signals)) >= 2
	it.Why = explain(it)
	return it
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// dedupSignals keeps one signal per (origin, attribution) and one signal
// per popularity counter — the newest — with its fixed label.
func dedupSignals(in []Signal) []Signal {
	sorted := slices.Clone(in)
	slices.SortFunc(sorted, func(a, b Signal) int {
		return strings.Compare(a.Origin+"\x00"+a.ObservedAt+"\x00"+a.Attribution, b.Origin+"\x00"+b.ObservedAt+"\x00"+b.Attribution)
	})
	var out []Signal
	for _, s := range sorted {
		if label, ok := popularityCounters[s.Origin]; ok {
			s.Label = label
			if n := len(out); n > 0 && out[n-1].Origin == s.Origin {
				out[n-1] = s // sorted by time within an origin: the later one stays
				continue
			}
		} else if slices.ContainsFunc(out, func(o Signal) bool { return o.Origin == s.Origin && o.Attribution == s.Attribution }) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func origins(ss []Signal) []string {
	var out []string
	for _, s := range ss {
		out = appendNew(out, s.Origin)
	}
	return out
}

func breadth(ss []Signal) int {
	n := 0
	for _, o := range origins(ss) {
		if !IsPopularity(o) {
			n++
		}
	}
	return n
}

func unresolved(failures []string, resolved map[string]bool) int {
	seen := map[string]bool{}
	for _, f := range failures {
		if !resolved[f] {
			seen[f] = true
		}
	}
	return len(seen)
}

// gapOf judges the measured records about the item: predictions never
// count as coverage.
func gapOf(it Item, ev Evidence) (Gap, string) {
	var mine []evidence.Record
	predicted := 0
	for _, r := range ev.Records {
		if r.Subject[evidence.SubjectArtifact] != it.DedupKey || (it.ClaimScope != "" && r.ClaimScope != it.ClaimScope) {
			continue
		}
		if r.EpistemicStatus != evidence.Measured {
			predicted++
			continue
		}
		mine = append(mine, r)
	}
	scope := string(it.ClaimScope)
	if scope == "" {
		scope = "any-scope"
	}
	if len(mine) == 0 {
		return GapMissing, fmt.Sprintf("no measured %s record for this fingerprint (%d calculated or predicted)", scope, predicted)
	}
	if res, err := evidence.Resolve(mine); err == nil {
		for _, r := range res {
			if r.Contested {
				return GapContested, fmt.Sprintf("%d measured %s records disagree across levels; nothing auto-resolves", len(r.Shown), scope)
			}
		}
	}
	for _, r := range mine {
		if evidence.Evaluate(r, ev.Freshness).State == evidence.Fresh {
			return GapCovered, fmt.Sprintf("%d measured %s record(s), at least one fresh and none contested", len(mine), scope)
		}
	}
	return GapStale, fmt.Sprintf("every measured %s record has expired or its freshness is unknown (%s)", scope, evidence.Evaluate(mine[0], ev.Freshness).Reason)
}

func explain(it Item) []string {
	why := []string{fmt.Sprintf("gap %s: %s", it.Gap, it.GapReason)}
	if it.Sources[0].direct() {
		why = append(why, fmt.Sprintf("entered directly as %s (%s)", it.Sources[0], strings.Join(it.References, ", ")))
	} else if it.Eligible {
		why = append(why, fmt.Sprintf("eligible on %d independent origin(s); popularity counters are shown, not counted", it.Breadth))
	} else {
		why = append(why, "not eligible: signals need two independent origins or one that is not a popularity counter")
	}
	why = append(why, fmt.Sprintf("unresolved failures %d; uncertainty %g; signal breadth %d", it.FailureValue, it.Uncertainty, it.Breadth))
	for _, s := range it.Signals {
		line := fmt.Sprintf("signal %s=%g (%s, %s)", s.Origin, s.Value, s.ObservedAt, s.Attribution)
		if IsPopularity(s.Origin) {
			line += " — labelled: " + s.Label + "; shown, never counted for eligibility or order"
		}
		why = append(why, line)
	}
	return why
}
