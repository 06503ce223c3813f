package evidence

import (
	"slices"
	"testing"
)

const gib = 1 << 30

var (
	art = map[string]string{SubjectArtifact: "art"}
	hw  = map[string]string{SubjectArtifact: "art", SubjectHardwareClass: "nvidia/h100/80GiB/9.0/x1", SubjectEndpoint: "ep"}
	ep  = map[string]string{SubjectEndpoint: "ep", SubjectApplication: "app"}
	sol = map[string]string{SubjectSolution: "sol"}
)

func query() TierQuery {
	return TierQuery{Artifact: "art", HardwareClass: "nvidia/h100/80GiB/9.0/x1", Endpoint: "ep", Application: "app", Solution: "sol",
		MarginBytes: 2 * gib, ServingConstraints: []string{"ttft_p99_ms"},
		Freshness: FreshnessInput{Now: t0, Releases: vs("0.29.0"), Advisories: []Advisory{}, DeployedEngine: vp("0.29.0")}}
}

func prediction(headroom float64) Record {
	return rec(KindPrediction, ScopeMemory, CalculatedOnly, VerdictFits, "0.29.0", art, func(r *Record) { r.Claim.Value = fp(headroom) })
}
func bootAt(engine string, subject map[string]string) Record {
	return rec(KindBoot, ScopeBoot, MaintainerLabMeasured, VerdictHealthy, engine, subject)
}
func serving(verdict string) Record {
	return rec(KindWorkload, ScopeServingPerformance, MaintainerLabMeasured, verdict, "0.29.0", ep, func(r *Record) { r.Claim.Quantity = "ttft_p99_ms" })
}
func task() Record {
	return rec(KindTask, ScopeTaskOutcome, MaintainerLabMeasured, VerdictPass, "0.29.0", ep)
}
func accepted() Record {
	return rec(KindAcceptance, ScopeConfig, MaintainerLabMeasured, VerdictAccepted, "0.29.0", ep)
}
func reproduction() Record {
	return rec(KindTask, ScopeTaskOutcome, MaintainerLabMeasured, VerdictReproduced, "0.29.0", sol, func(r *Record) { r.Claim.Quantity = "exact_solution_reproduction" })
}

func recommendedSet() []Record {
	return []Record{prediction(4 * gib), bootAt("0.29.0", hw), serving(VerdictMeetsSLO), task(), accepted()}
}

func TestTierDerivation(t *testing.T) {
	without := func(rs []Record, drop int) []Record { return slices.Delete(slices.Clone(rs), drop, drop+1) }
	cases := []struct {
		sentence string
		records  []Record
		mod      func(*TierQuery)
		want     Tier
		missing  Requirement
	}{
		{"No records: no tier.", nil, nil, TierNone, NeedFittingPrediction},
		{"Candidate: prediction only, from calculations; no boot evidence is needed.",
			[]Record{prediction(4 * gib)}, nil, Candidate, NeedBootSameHardware},
		{"Candidate: a prediction that does not fit is no candidate.",
			[]Record{rec(KindPrediction, ScopeMemory, CalculatedOnly, "does_not_fit", "0.29.0", art)}, nil, TierNone, NeedFittingPrediction},
		{"Conservative: fits by calculation with a stated margin and boot-verified on the same hardware class.",
			[]Record{prediction(4 * gib), bootAt("0.29.0", hw)}, nil, Conservative, NeedServing},
		{"Conservative: margin below the stated margin stays candidate.",
			[]Record{prediction(1 * gib), bootAt("0.29.0", hw)}, nil, Candidate, NeedMargin},
		{"Conservative: a boot on another hardware class does not count.",
			[]Record{prediction(4 * gib), bootAt("0.29.0", map[string]string{SubjectArtifact: "art", SubjectHardwareClass: "nvidia/h100/94GiB/9.0/x1"})}, nil, Candidate, NeedBootSameHardware},
		{"Conservative: boot at any engine version (an old, stale boot still counts).",
			[]Record{prediction(4 * gib), bootAt("0.27.0", hw)}, func(q *TierQuery) { q.Freshness.Releases = vs("0.28.0", "0.29.0") }, Conservative, NeedBootCurrentEngine},
		{"Recommended endpoint: task- and serving-verified for the exact endpoint/application at the current engine against the accepted request.",
			recommendedSet(), nil, RecommendedEndpoint, NeedExactReproduction},
		{"No Recommended without serving evidence.", without(recommendedSet(), 2), nil, Conservative, NeedServing},
		{"No Recommended without task evidence (serving never implies task success).", without(recommendedSet(), 3), nil, Conservative, NeedTask},
		{"No Recommended without an accepted request.", without(recommendedSet(), 4), nil, Conservative, NeedAcceptedRequest},
		{"No Recommended with serving that misses the SLO.",
			[]Record{prediction(4 * gib), bootAt("0.29.0", hw), serving("violates_slo"), task(), accepted()}, nil, Conservative, NeedServing},
		{"No Recommended on stale serving evidence (engine minor moved on).",
			append(recommendedSet(), bootAt("0.30.0", hw)), func(q *TierQuery) { q.Freshness.DeployedEngine = vp("0.30.0"); q.Freshness.Releases = vs("0.30.0") }, Conservative, NeedServing},
		{"No Recommended without boot at the current engine identity.",
			recommendedSet(), func(q *TierQuery) { q.Freshness.DeployedEngine = vp("0.29.1") }, Conservative, NeedBootCurrentEngine},
		{"No Recommended on a boot of another execution: the boot must be at the endpoint's own fingerprint.",
			[]Record{prediction(4 * gib), bootAt("0.29.0", map[string]string{SubjectArtifact: "art", SubjectHardwareClass: "nvidia/h100/80GiB/9.0/x1", SubjectEndpoint: "old"}),
				serving(VerdictMeetsSLO), task(), accepted()}, nil, Conservative, NeedBootCurrentEngine},
		{"No Recommended for another endpoint: a tier never promotes across fingerprints.",
			recommendedSet(), func(q *TierQuery) { q.Endpoint = "other" }, Conservative, NeedServing},
		{"No Recommended with a contested record in the basis.",
			append(recommendedSet(), rec(KindWorkload, ScopeServingPerformance, CommunityReported, "violates_slo", "0.29.0", ep, func(r *Record) { r.Claim.Quantity = "ttft_p99_ms" })), nil, Conservative, NeedServing},
		{"Qualified solution: exact-solution task reproduction plus every applicable serving constraint.",
			append(recommendedSet(), reproduction()), nil, QualifiedSolution, ""},
		{"No Qualified without exact-solution reproduction.",
			recommendedSet(), nil, RecommendedEndpoint, NeedExactReproduction},
		{"No Qualified when a declared serving constraint has no record.",
			append(recommendedSet(), reproduction()), func(q *TierQuery) { q.ServingConstraints = []string{"ttft_p99_ms", "itl_p99_ms"} }, RecommendedEndpoint, NeedEveryServingRequired},
	}
	for _, c := range cases {
		t.Run(c.sentence, func(t *testing.T) {
			q := query()
			if c.mod != nil {
				c.mod(&q)
			}
			d, err := Derive(c.records, q)
			if err != nil {
				t.Fatal(err)
			}
			if d.Tier != c.want {
				t.Fatalf("tier %s, want %s (missing %v)", d.Tier, c.want, d.Missing)
			}
			if c.missing != "" && !slices.Contains(d.Missing, c.missing) {
				t.Fatalf("missing %v, want it to include %s", d.Missing, c.missing)
			}
			if d.MarginBytes != q.MarginBytes {
				t.Fatalf("stated margin not recorded")
			}
		})
	}
}

func TestContestedBasisIsReported(t *testing.T) {
	rs := append(recommendedSet(), rec(KindWorkload, ScopeServingPerformance, CommunityReported, "violates_slo", "0.29.0", ep, func(r *Record) { r.Claim.Quantity = "ttft_p99_ms" }))
	d, _ := Derive(rs, query())
	if len(d.Contested) != 1 {
		t.Fatalf("contested keys %v, want the serving key", d.Contested)
	}
}

func TestTierDerivationDeterministic(t *testing.T) {
	rs := append(recommendedSet(), reproduction())
	a, _ := Derive(rs, query())
	slices.Reverse(rs)
	b, _ := Derive(rs, query())
	if !slices.Equal(a.Basis, b.Basis) || a.Tier != b.Tier || len(a.Basis) == 0 {
		t.Fatalf("input order changed the decision: %+v vs %+v", a, b)
	}
}
