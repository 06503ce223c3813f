package planner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// world is what random records are about: the plan's artifact and
// hardware class among others, and a few endpoints, applications and
// solutions, so that tiers up to qualified and conflicts all occur.
type world struct {
	res       Result
	artifacts []string
	hardware  []string
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// randomRecord draws one record. The value sets are small on purpose:
// records then share conflict keys and disagree, so contested and
// superseded keys are exercised too.
func (w world) randomRecord(tb testing.TB, rng *rand.Rand, i int) evidence.Record {
	tb.Helper()
	subj := map[string]string{}
	if rng.IntN(4) > 0 {
		subj[evidence.SubjectArtifact] = pick(rng, w.artifacts...)
		subj[evidence.SubjectHardwareClass] = pick(rng, w.hardware...)
	}
	if rng.IntN(3) == 0 {
		subj[evidence.SubjectEndpoint] = pick(rng, "e1", "e2")
	}
	if rng.IntN(3) == 0 {
		subj[evidence.SubjectApplication] = pick(rng, "p1", "p2")
	}
	if rng.IntN(6) == 0 {
		subj[evidence.SubjectSolution] = "s1"
	}
	if len(subj) == 0 {
		subj["window"] = "w1"
	}
	r := evidence.Record{
		EpistemicStatus: evidence.Measured, Level: pick(rng, evidence.Levels[:4]...), Subject: subj,
		Engine:     evidence.Engine{Name: "vllm", Version: pick(rng, "0.10.0", "0.11.0", "0.11.1", "nightly"), Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: map[string]any{},
	}
	verdict := func(vs ...string) *string { v := pick(rng, vs...); return &v }
	switch rng.IntN(5) {
	case 0:
		v := pick(rng, 0.5, 2.0, 8.0) * (1 << 30)
		r.Kind, r.ClaimScope, r.EpistemicStatus, r.Level = evidence.KindPrediction, evidence.ScopeMemory, evidence.Predicted, evidence.CalculatedOnly
		r.Claim = evidence.Claim{Quantity: "memory_fit", Verdict: verdict(evidence.VerdictFits, "does_not_fit"), Value: &v, Unit: "bytes"}
	case 1:
		r.Kind, r.ClaimScope = evidence.KindBoot, evidence.ScopeBoot
		r.Claim = evidence.Claim{Quantity: "boot", Verdict: verdict(evidence.VerdictHealthy, evidence.VerdictFailed)}
	case 2:
		r.Kind, r.ClaimScope = evidence.KindWorkload, evidence.ScopeServingPerformance
		r.Claim = evidence.Claim{Quantity: pick(rng, "ttft_p99_ms", "tpot_p99_ms"), Verdict: verdict(evidence.VerdictMeetsSLO, evidence.VerdictFail)}
	case 3:
		r.Kind, r.ClaimScope = evidence.KindTask, evidence.ScopeTaskOutcome
		r.Claim = evidence.Claim{Quantity: pick(rng, "task_score", "exact_solution_reproduction"), Verdict: verdict(evidence.VerdictPass, evidence.VerdictReproduced, evidence.VerdictFail)}
	default:
		r.Kind, r.ClaimScope, r.EpistemicStatus = evidence.KindAcceptance, evidence.ScopeConfig, evidence.Derived
		r.Claim = evidence.Claim{Quantity: "acceptance", Verdict: verdict(evidence.VerdictAccepted, evidence.VerdictProposed)}
	}
	if r.EpistemicStatus == evidence.Measured && rng.IntN(2) == 0 {
		exec, err := toDisplay(w.res.Execution)
		if err != nil {
			tb.Fatal(err)
		}
		r.Display[DisplayExecution] = exec
		subj["execution"] = w.res.ExecutionFP
	}
	return evidence.Stamp(r, ports.NewFake(clock().Now().Add(time.Duration(i)*time.Second)))
}

// fill stores n random records, every other one as a build without the
// index wrote it (so lookups must find unindexed records too).
func (w world) fill(tb testing.TB, st *store.Store, rng *rand.Rand, n int) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(st.Root, "records"), 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		r := w.randomRecord(tb, rng, i)
		if i%2 == 0 {
			writeRaw(tb, st.Root, r)
		} else if _, err := st.PutRecord(r); err != nil {
			tb.Fatal(err)
		}
	}
}

func newWorld(t *testing.T) world {
	res := plan(t, Request{ModelDir: llama(t, 2), GPU: "h100-sxm", Launch: memory.LaunchConfig{MaxModelLen: 8192}, MarginBytes: 1 << 30})
	return world{res: res, artifacts: []string{res.ArtifactSubject(), "unresolved:lineage:other", "1220" + fmt.Sprintf("%064x", 7)},
		hardware: []string{res.HardwareClass(), "a100-80gb/81224mib/cc8.0/x1"}}
}

// tierQueries are the queries whose tiers must not depend on the index:
// Save's own, and ones naming endpoint, application and solution (with
// the freshness inputs those rules read), which widen the terms.
func (w world) tierQueries() []evidence.TierQuery {
	dep, _ := evidence.ParseVersion("0.11.1")
	rels := []evidence.Version{dep}
	fresh := evidence.FreshnessInput{Now: clock().Now(), Releases: rels, Advisories: []evidence.Advisory{}, DeployedEngine: &dep}
	base := evidence.TierQuery{Artifact: w.res.ArtifactSubject(), HardwareClass: w.res.HardwareClass(), MarginBytes: 1 << 30, Freshness: fresh}
	full := base
	full.Endpoint, full.Application, full.Solution, full.ServingConstraints = "e1", "p1", "s1", []string{"ttft_p99_ms"}
	other := full
	other.Artifact, other.Endpoint = "unresolved:lineage:other", "e2"
	noArtifact := full
	noArtifact.Artifact = ""
	return []evidence.TierQuery{base, full, other, noArtifact, {Artifact: w.res.ArtifactSubject(), Freshness: evidence.FreshnessInput{Now: clock().Now()}}}
}

func recordsOf(tb testing.TB, st *store.Store) []evidence.Record {
	tb.Helper()
	all, err := st.Records()
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]evidence.Record, len(all))
	for i, s := range all {
		out[i] = s.Record
	}
	return out
}

func priorDigests(tb testing.TB, records []evidence.Record, res Result) []string {
	tb.Helper()
	out := []string{}
	for _, p := range priorCandidates(records, res) {
		d, err := p.Record.Digest()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestIndexedTierEqualsFullScan is the property the index must keep: for
// random stores of mixed records, the tier and the priors derived from
// the records the index names equal those derived from every record.
func TestIndexedTierEqualsFullScan(t *testing.T) {
	w := newWorld(t)
	tiers := map[evidence.Tier]int{}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 27))
		st := store.Open(t.TempDir())
		w.fill(t, st, rng, 30+rng.IntN(90))
		all := recordsOf(t, st)
		for qi, q := range w.tierQueries() {
			subset, err := load(st, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := evidence.Derive(all, q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := evidence.Derive(subset, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d query %d: indexed tier\n%+v\nfull scan\n%+v", seed, qi, got, want)
			}
			tiers[want.Tier]++
			if g, wnt := priorDigests(t, subset, w.res), priorDigests(t, all, w.res); q.Artifact == w.res.ArtifactSubject() && !reflect.DeepEqual(g, wnt) {
				t.Fatalf("seed %d: prior candidates %v, full scan %v", seed, g, wnt)
			}
		}
		clk := ports.NewFake(clock().Now().Add(time.Hour))
		got, err := Save(st, w.res, clk)
		if err != nil {
			t.Fatal(err)
		}
		want, err := saveFullScan(st, w.res, clk) // same clock: the same record, already stored
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: Save\n%+v\nfull scan\n%+v", seed, got, want)
		}
	}
	t.Logf("tiers seen: %v", tiers)
	// The property is only as good as the tiers it saw.
	for _, tier := range []evidence.Tier{evidence.TierNone, evidence.Candidate, evidence.Conservative} {
		if tiers[tier] == 0 {
			t.Errorf("no random store reached tier %s: %v", tier, tiers)
		}
	}
}

// TestSaveAfterIndexDamage: whatever happened to the index, Save gives the
// full scan's outcome.
func TestSaveAfterIndexDamage(t *testing.T) {
	w := newWorld(t)
	index := func(st *store.Store) string { return filepath.Join(st.Root, "index") }
	cases := []struct {
		name string
		harm func(t *testing.T, st *store.Store)
	}{
		{"none", func(*testing.T, *store.Store) {}},
		{"index missing", func(t *testing.T, st *store.Store) { os.RemoveAll(index(st)) }},
		{"index corrupt", func(t *testing.T, st *store.Store) {
			filepath.WalkDir(index(st), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					os.WriteFile(p, []byte("narwhal.evidence.index 1\n"+"1220"), 0o644)
				}
				return nil
			})
		}},
		{"index stale: boots by an older build", func(t *testing.T, st *store.Store) {
			for i, hw := range w.hardware {
				writeRaw(t, st.Root, measuredBoot(t, w.res, hw, "0.11.0", clock().Now().Add(time.Duration(i)*time.Minute)))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := store.Open(t.TempDir())
			w.fill(t, st, rand.New(rand.NewPCG(1, 2)), 80)
			if _, err := Save(st, w.res, clock()); err != nil { // builds the index
				t.Fatal(err)
			}
			c.harm(t, st)
			clk := ports.NewFake(clock().Now().Add(time.Hour))
			got, err := Save(st, w.res, clk)
			if err != nil {
				t.Fatal(err)
			}
			want, err := saveFullScan(st, w.res, clk)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Save\n%+v\nfull scan\n%+v", got, want)
			}
		})
	}
}

// A plan stores what it read, where, and the digests it found, as a
// metadata record of the artifact (reference/evidence.md §2.5).
func TestSaveStoresTheSourceObservation(t *testing.T) {
	w := newWorld(t)
	st := store.Open(t.TempDir())
	out, err := Save(st, w.res, clock())
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := st.Get(out.SourceDigest)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := r.Display["locator"].(map[string]any)
	if r.Kind != evidence.KindMetadata || r.Claim.Quantity != QuantitySource || r.Subject[evidence.SubjectArtifact] != w.res.ArtifactSubject() ||
		loc["source_kind"] != "local" || loc["uri"] == "" {
		t.Fatalf("source record %+v", r)
	}
	want := "unresolved"
	if w.res.Local.Identity != nil {
		want = "resolved"
		obs, _ := r.Display["source_observation"].(map[string]any)
		if files, _ := obs["file_digests"].([]any); len(files) == 0 {
			t.Fatalf("a resolved source without file digests: %+v", obs)
		}
	}
	if *r.Claim.Verdict != want {
		t.Fatalf("verdict %s, want %s", *r.Claim.Verdict, want)
	}
}
