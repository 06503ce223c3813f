package evidence

// Level is an evidence level. The order is total (ADR-006 §8):
// maintainer-lab measured > independently reproduced > authoritative-external
// > community-reported > calculated-only. Independently reproduced is a
// level, not a multiplier: nothing is ever counted.
type Level string

const (
	MaintainerLabMeasured   Level = "maintainer_lab_measured"
	IndependentlyReproduced Level = "independently_reproduced"
	AuthoritativeExternal   Level = "authoritative_external"
	CommunityReported       Level = "community_reported"
	CalculatedOnly          Level = "calculated_only"
)

// Levels lists every level, strongest first.
var Levels = []Level{MaintainerLabMeasured, IndependentlyReproduced, AuthoritativeExternal, CommunityReported, CalculatedOnly}

// Rank is higher for stronger levels; 0 for an unknown level.
func (l Level) Rank() int {
	for i, x := range Levels {
		if x == l {
			return len(Levels) - i
		}
	}
	return 0
}

// Valid reports whether l is one of the five levels.
func (l Level) Valid() bool { return l.Rank() > 0 }

// Stronger reports whether l outranks m.
func (l Level) Stronger(m Level) bool { return l.Rank() > m.Rank() }
