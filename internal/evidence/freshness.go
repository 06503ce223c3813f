package evidence

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FreshnessClock says when a kind of evidence expires. It is a property of
// the kind, never chosen by the producer.
type FreshnessClock string

const (
	NextEngineMinorRelease FreshnessClock = "next_engine_minor_release"
	EngineMinor            FreshnessClock = "engine_minor"
	Days30                 FreshnessClock = "days_30"
	MinorOrAdvisory        FreshnessClock = "engine_minor_or_advisory"
	Never                  FreshnessClock = "never"
)

// ClockFor returns the freshness clock of a kind (ADR-006 §8).
func ClockFor(k Kind) FreshnessClock {
	switch k {
	case KindCompatibility, KindBoot, KindPrediction, KindEndpointState:
		return NextEngineMinorRelease
	case KindWorkload, KindTask:
		return EngineMinor
	case KindPrice:
		return Days30
	case KindSecurity:
		return MinorOrAdvisory
	}
	return Never // metadata at a pinned revision; acceptances do not age
}

// Advisory is one dependency advisory: the packages ("name@version") it
// affects, and the version ranges of a package it affects (an OSV
// record's affected[].versions and ranges; internal/evidence/osv).
type Advisory struct {
	ID      string          `json:"id"`
	Affects []string        `json:"affects"`
	Ranges  []AdvisoryRange `json:"ranges,omitempty"`
}

// AdvisoryRange is [Introduced, Fixed) or [Introduced, LastAffected] of
// one package ("0" introduced: every earlier version; neither end: every
// later version).
type AdvisoryRange struct {
	Package      string `json:"package"`
	Introduced   string `json:"introduced"`
	Fixed        string `json:"fixed,omitempty"`
	LastAffected string `json:"last_affected,omitempty"`
}

// affects says the range covers version v of pkg. A bound that is not a
// version this package can order makes the range cover nothing rather
// than guess.
func (r AdvisoryRange) affects(pkg string, v Version) bool {
	if r.Package != pkg {
		return false
	}
	if r.Introduced != "0" {
		lo, err := ParseVersion(r.Introduced)
		if err != nil || v.Compare(lo) < 0 {
			return false
		}
	}
	switch {
	case r.Fixed != "":
		hi, err := ParseVersion(r.Fixed)
		return err == nil && v.Compare(hi) < 0
	case r.LastAffected != "":
		hi, err := ParseVersion(r.LastAffected)
		return err == nil && v.Compare(hi) <= 0
	}
	return true
}

// FreshnessInput is the snapshot freshness is judged against. A nil
// Releases or Advisories means "not supplied", which fails closed.
type FreshnessInput struct {
	Now            time.Time // from ports.Clock
	Releases       []Version // engine releases known
	Advisories     []Advisory
	DeployedEngine *Version // engine currently attested for the subject
}

// State of a record's freshness.
type State string

const (
	Fresh   State = "fresh"
	Stale   State = "stale"
	Unknown State = "unknown"
)

// Freshness is a state and the reason for it.
type Freshness struct {
	State  State
	Reason string
}

const priceTTL = 30 * 24 * time.Hour

// Evaluate judges r's freshness. It is pure: the clock reading and the
// release and advisory snapshots come in with in.
func Evaluate(r Record, in FreshnessInput) Freshness {
	clock := ClockFor(r.Kind)
	if clock == Never {
		return Freshness{Fresh, "pinned metadata never expires"}
	}
	if clock == Days30 {
		return evalAge(r, in.Now)
	}
	v, err := ParseVersion(r.Engine.Version)
	if err != nil {
		return Freshness{Unknown, err.Error()}
	}
	switch clock {
	case NextEngineMinorRelease:
		return evalNextMinor(v, in.Releases)
	case EngineMinor:
		return evalSameMinor(v, in.DeployedEngine)
	}
	if f := evalAdvisories(r, in.Advisories); f.State != Fresh {
		return f
	}
	return evalNextMinor(v, in.Releases)
}

func evalAge(r Record, now time.Time) Freshness {
	at, err := time.Parse(time.RFC3339Nano, r.ObservedAt)
	if err != nil {
		return Freshness{Unknown, "observed_at unreadable"}
	}
	if age := now.Sub(at); age >= priceTTL {
		return Freshness{Stale, fmt.Sprintf("age %dh is 30 days or more", int(age.Hours()))}
	}
	return Freshness{Fresh, "younger than 30 days"}
}

// evalNextMinor: stale once a final release of a later minor exists.
// Patch releases, release candidates and dev builds do not expire it.
func evalNextMinor(v Version, releases []Version) Freshness {
	if releases == nil {
		return Freshness{Unknown, "no release index supplied"}
	}
	for _, rel := range releases {
		if rel.Final() && (rel.Major > v.Major || rel.Major == v.Major && rel.Minor > v.Minor) {
			return Freshness{Stale, fmt.Sprintf("vllm %s released", rel)}
		}
	}
	return Freshness{Fresh, "no later minor release"}
}

func evalSameMinor(v Version, deployed *Version) Freshness {
	if deployed == nil {
		return Freshness{Unknown, "no deployed engine for the subject"}
	}
	if !v.SameMinor(*deployed) {
		return Freshness{Stale, fmt.Sprintf("measured on %d.%d, deployed engine is %s", v.Major, v.Minor, deployed)}
	}
	return Freshness{Fresh, "same engine minor as deployed"}
}

func evalAdvisories(r Record, advisories []Advisory) Freshness {
	if advisories == nil {
		return Freshness{Unknown, "no advisory index supplied"}
	}
	deps := append([]string{r.Engine.Name + "@" + r.Engine.Version}, r.Engine.Packages...)
	for _, a := range advisories {
		for _, p := range a.Affects {
			if slices.Contains(deps, p) {
				return Freshness{Stale, fmt.Sprintf("advisory %s affects %s", a.ID, p)}
			}
		}
		for _, d := range deps {
			name, ver, _ := strings.Cut(d, "@")
			v, err := ParseVersion(ver)
			if err != nil {
				continue
			}
			for _, rg := range a.Ranges {
				if rg.affects(strings.ToLower(name), v) {
					return Freshness{Stale, fmt.Sprintf("advisory %s affects %s (range from %s)", a.ID, d, rg.Introduced)}
				}
			}
		}
	}
	return Freshness{Fresh, "no advisory affects the dependency set"}
}
