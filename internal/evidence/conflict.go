package evidence

import (
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// ConflictKey groups records that make the same claim about the same
// subject; engine identity is left out so engine versions can be compared.
func ConflictKey(r Record) (string, error) {
	_, d, err := canon.MarshalDigest(map[string]any{
		"kind": r.Kind, "claim_scope": r.ClaimScope, "subject": r.Subject, "quantity": r.Claim.Quantity,
	})
	return d, err
}

// Resolution is the outcome of the conflict rule for one key.
type Resolution struct {
	Key       string
	Contested bool
	// Winner is the digest of the record the rule picks; empty when
	// contested. When nobody disagrees it is the strongest record.
	Winner string
	// Shown lists every record's digest, level descending, engine version
	// descending, digest ascending: nothing is ever hidden.
	Shown []string
	Notes []string
}

type entry struct {
	r       Record
	digest  string
	version *Version
}

// Resolve applies ADR-006's conflict rule to records, grouped by key and
// returned in key order. Across levels a disagreement is contested and
// nothing auto-resolves; within a level the newer engine version wins;
// within a level at the same (or an unparsable) engine version a
// disagreement is contested too, because picking one would be
// auto-resolution.
func Resolve(records []Record) ([]Resolution, error) {
	groups := map[string][]entry{}
	for _, r := range records {
		k, err := ConflictKey(r)
		if err != nil {
			return nil, err
		}
		d, err := r.Digest()
		if err != nil {
			return nil, err
		}
		e := entry{r: r, digest: d}
		if v, err := ParseVersion(r.Engine.Version); err == nil {
			e.version = &v
		}
		groups[k] = append(groups[k], e)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Resolution, 0, len(keys))
	for _, k := range keys {
		out = append(out, resolveGroup(k, groups[k]))
	}
	return out, nil
}

func resolveGroup(key string, es []entry) Resolution {
	sortEntries(es)
	res := Resolution{Key: key}
	for _, e := range es {
		res.Shown = append(res.Shown, e.digest)
	}
	for i := range es {
		for j := i + 1; j < len(es); j++ {
			if note, contested := judge(es[i], es[j]); contested {
				res.Contested = true
				res.Notes = append(res.Notes, note)
			} else if note != "" {
				res.Notes = append(res.Notes, note)
			}
		}
	}
	if !res.Contested && len(es) > 0 {
		res.Winner = es[0].digest
	}
	return res
}

// judge compares two records of one key, a shown before b.
func judge(a, b entry) (note string, contested bool) {
	if !disagree(a.r.Claim, b.r.Claim) {
		return "", false
	}
	if a.r.Level != b.r.Level {
		return fmt.Sprintf("contested: %s (%s) disagrees with %s (%s) across levels", short(a.digest), a.r.Level, short(b.digest), b.r.Level), true
	}
	if a.version == nil || b.version == nil || a.version.Compare(*b.version) == 0 {
		return fmt.Sprintf("contested: %s and %s disagree at level %s and the same or an unparsable engine version", short(a.digest), short(b.digest), a.r.Level), true
	}
	return fmt.Sprintf("superseded_by_newer_engine: %s (%s) over %s (%s)", short(a.digest), a.r.Engine.Version, short(b.digest), b.r.Engine.Version), false
}

// disagree: verdicts differ, or values differ by more than the sum of the
// tolerances, or one claim has what the other lacks.
func disagree(a, b Claim) bool {
	if (a.Verdict == nil) != (b.Verdict == nil) || (a.Value == nil) != (b.Value == nil) {
		return true
	}
	if a.Verdict != nil && *a.Verdict != *b.Verdict {
		return true
	}
	if a.Value != nil {
		diff := *a.Value - *b.Value
		if diff < 0 {
			diff = -diff
		}
		return diff > a.Tolerance+b.Tolerance
	}
	return false
}

func sortEntries(es []entry) {
	sort.SliceStable(es, func(i, j int) bool { return shownBefore(es[i], es[j]) })
}

func shownBefore(a, b entry) bool {
	if a.r.Level != b.r.Level {
		return a.r.Level.Stronger(b.r.Level)
	}
	if a.version != nil && b.version != nil {
		if c := a.version.Compare(*b.version); c != 0 {
			return c > 0
		}
	} else if (a.version != nil) != (b.version != nil) {
		return a.version != nil
	}
	return a.digest < b.digest
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}
