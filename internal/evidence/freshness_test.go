package evidence

import (
	"testing"
	"time"
)

func TestFreshnessClocks(t *testing.T) {
	withPkg := func(r Record) Record { r.Engine.Packages = []string{"torch@2.8.0"}; return r }
	aged := func(d time.Duration) Record {
		r := rec(KindPrice, ScopeOutcomeEconomics, AuthoritativeExternal, "x", "0.29.0", subj)
		r.ObservedAt = t0.Add(-d).Format(time.RFC3339Nano)
		return r
	}
	in := func(mod func(*FreshnessInput)) FreshnessInput {
		f := FreshnessInput{Now: t0, Releases: vs("0.29.0"), Advisories: []Advisory{}, DeployedEngine: vp("0.29.0")}
		mod(&f)
		return f
	}
	none := func(*FreshnessInput) {}
	cases := []struct {
		sentence string
		r        Record
		in       FreshnessInput
		want     State
	}{
		{"boot expires at the next vLLM minor release: patch release keeps it fresh",
			boot(MaintainerLabMeasured, VerdictHealthy, "0.29.0"), in(func(f *FreshnessInput) { f.Releases = vs("0.29.0", "0.29.1") }), Fresh},
		{"boot expires at the next vLLM minor release: 0.30.0 makes it stale",
			boot(MaintainerLabMeasured, VerdictHealthy, "0.29.0"), in(func(f *FreshnessInput) { f.Releases = vs("0.29.1", "0.30.0") }), Stale},
		{"boot: a release candidate of the next minor is not a release",
			boot(MaintainerLabMeasured, VerdictHealthy, "0.29.0"), in(func(f *FreshnessInput) { f.Releases = vs("0.30.0rc1", "0.30.0.dev12+g1234abc") }), Fresh},
		{"compatibility follows the same clock",
			rec(KindCompatibility, ScopeConfig, AuthoritativeExternal, "ok", "0.29.1rc1", subj), in(func(f *FreshnessInput) { f.Releases = vs("0.30.0") }), Stale},
		{"no release index: unknown (fails closed)",
			boot(MaintainerLabMeasured, VerdictHealthy, "0.29.0"), in(func(f *FreshnessInput) { f.Releases = nil }), Unknown},
		{"workload expires per engine minor: same minor is fresh",
			rec(KindWorkload, ScopeServingPerformance, MaintainerLabMeasured, VerdictMeetsSLO, "0.29.0", subj), in(func(f *FreshnessInput) { f.DeployedEngine = vp("0.29.3") }), Fresh},
		{"workload expires per engine minor: 0.30 deployed makes a 0.29 record stale",
			rec(KindWorkload, ScopeServingPerformance, MaintainerLabMeasured, VerdictMeetsSLO, "0.29.0", subj), in(func(f *FreshnessInput) { f.DeployedEngine = vp("0.30.0") }), Stale},
		{"workload without a deployed engine: unknown",
			rec(KindWorkload, ScopeServingPerformance, MaintainerLabMeasured, VerdictMeetsSLO, "0.29.0", subj), in(func(f *FreshnessInput) { f.DeployedEngine = nil }), Unknown},
		{"price expires after 30 days: 29 days is fresh", aged(29 * 24 * time.Hour), in(none), Fresh},
		{"price expires after 30 days: exactly 30 days is stale", aged(30 * 24 * time.Hour), in(none), Stale},
		{"security expires on any dependency advisory",
			withPkg(rec(KindSecurity, ScopeConfig, MaintainerLabMeasured, "clean", "0.29.0", subj)), in(func(f *FreshnessInput) {
				f.Advisories = []Advisory{{ID: "GHSA-1", Affects: []string{"torch@2.8.0"}}}
			}), Stale},
		{"security expires at the next engine minor",
			withPkg(rec(KindSecurity, ScopeConfig, MaintainerLabMeasured, "clean", "0.29.0", subj)), in(func(f *FreshnessInput) { f.Releases = vs("0.30.0") }), Stale},
		{"security with no advisory and no new minor is fresh",
			withPkg(rec(KindSecurity, ScopeConfig, MaintainerLabMeasured, "clean", "0.29.0", subj)), in(none), Fresh},
		{"metadata at a pinned revision never expires",
			rec(KindMetadata, ScopeConfig, AuthoritativeExternal, "x", "0.1.0", subj), in(func(f *FreshnessInput) { f.Releases = vs("9.0.0"); f.Now = t0.Add(1e6 * time.Hour) }), Fresh},
	}
	for _, c := range cases {
		if got := Evaluate(c.r, c.in); got.State != c.want {
			t.Errorf("%s: %s (%s), want %s", c.sentence, got.State, got.Reason, c.want)
		}
	}
}

// The clock is a property of the kind; a producer has no field to choose it.
func TestProducerCannotChooseClock(t *testing.T) {
	want := map[Kind]FreshnessClock{KindCompatibility: NextEngineMinorRelease, KindBoot: NextEngineMinorRelease,
		KindWorkload: EngineMinor, KindPrice: Days30, KindSecurity: MinorOrAdvisory, KindMetadata: Never}
	for k, c := range want {
		if got := ClockFor(k); got != c {
			t.Errorf("ClockFor(%s) = %s, want %s", k, got, c)
		}
	}
}
