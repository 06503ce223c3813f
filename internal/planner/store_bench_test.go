package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// saveFullScan is Save as it was before the store had an index: every
// record is read and decoded for every plan. It is the baseline the
// benchmark and the equivalence tests compare against.
func saveFullScan(st *store.Store, res Result, clock ports.Clock) (Outcome, error) {
	rec, err := res.Record(clock)
	if err != nil {
		return Outcome{}, err
	}
	exec, err := toDisplay(res.Execution)
	if err != nil {
		return Outcome{}, err
	}
	rec.Display[DisplayExecution] = exec
	d, err := st.PutRecord(rec)
	if err != nil {
		return Outcome{}, err
	}
	src, err := res.SourceRecord(clock)
	if err != nil {
		return Outcome{}, err
	}
	sd, err := st.PutRecord(src)
	if err != nil {
		return Outcome{}, err
	}
	all, err := st.Records()
	if err != nil {
		return Outcome{}, err
	}
	records := make([]evidence.Record, len(all))
	for i, s := range all {
		records[i] = s.Record
	}
	now := evidence.FreshnessInput{Now: clock.Now()}
	tier, err := evidence.Derive(records, evidence.TierQuery{Artifact: res.ArtifactSubject(), HardwareClass: res.HardwareClass(),
		MarginBytes: float64(res.StatedMargin), Freshness: now})
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Record: rec, RecordDigest: d, SourceDigest: sd, Tier: tier, Priors: priors(records, res, now)}, nil
}

// writeRaw stores r the way a build without the index did: the canonical
// bytes under their digest, nothing else.
func writeRaw(tb testing.TB, root string, r evidence.Record) int {
	tb.Helper()
	b, d, err := evidence.Encode(r)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "records", d+".json"), b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return len(b)
}

// measuredBoot is a healthy boot of res's artifact on hw carrying res's
// execution input, so it is both tier basis and a prior.
func measuredBoot(tb testing.TB, res Result, hw, version string, at time.Time) evidence.Record {
	tb.Helper()
	exec, err := toDisplay(res.Execution)
	if err != nil {
		tb.Fatal(err)
	}
	v := evidence.VerdictHealthy
	return evidence.Stamp(evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured, Subject: map[string]string{evidence.SubjectArtifact: res.ArtifactSubject(), evidence.SubjectHardwareClass: hw, "execution": res.ExecutionFP},
		Claim:      evidence.Claim{Quantity: "boot", Verdict: &v},
		Engine:     evidence.Engine{Name: "vllm", Version: version, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: "bench", Inputs: []string{}}, Display: map[string]any{DisplayExecution: exec}}, ports.NewFake(at))
}

// store100MB fills a store with about 100 MB of prediction and boot
// records of other artifacts, as an older build would have left it (no
// index), plus a few records of res's own artifact.
func store100MB(b *testing.B, res Result) (*store.Store, int) {
	b.Helper()
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "records"), 0o755); err != nil {
		b.Fatal(err)
	}
	base, err := res.Record(clock())
	if err != nil {
		b.Fatal(err)
	}
	t0 := clock().Now()
	n, size := 0, 0
	for size < 100<<20 {
		r := base
		r.Subject = map[string]string{evidence.SubjectArtifact: fmt.Sprintf("unresolved:lineage:other-%d", n/4), evidence.SubjectHardwareClass: res.HardwareClass()}
		r = evidence.Stamp(r, ports.NewFake(t0.Add(time.Duration(n)*time.Second)))
		size += writeRaw(b, root, r)
		if n%8 == 0 {
			boot := measuredBoot(b, res, res.HardwareClass(), "0.11.0", t0.Add(time.Duration(n)*time.Second))
			boot.Subject[evidence.SubjectArtifact] = r.Subject[evidence.SubjectArtifact]
			size += writeRaw(b, root, boot)
		}
		n++
	}
	for i, hw := range []string{res.HardwareClass(), res.HardwareClass(), "a100-80gb/81224mib/cc8.0/x1"} {
		writeRaw(b, root, measuredBoot(b, res, hw, fmt.Sprintf("0.11.%d", i), t0))
	}
	return store.Open(root), size
}

// BenchmarkPlanSave100MB is issue 27's bound: Save of an 8B plan against
// 100 MB of records must take at most 50 ms. "index" is Save, "fullscan"
// the pre-index baseline in the same run.
func BenchmarkPlanSave100MB(b *testing.B) {
	res := benchPlan(b)
	for _, c := range []struct {
		name string
		save func(*store.Store, Result, ports.Clock) (Outcome, error)
	}{{"index", Save}, {"fullscan", saveFullScan}} {
		b.Run(c.name, func(b *testing.B) {
			st, size := store100MB(b, res)
			clk := ports.NewFake(clock().Now())
			if _, err := c.save(st, res, clk); err != nil { // an older build's store: the first plan builds the index
				b.Fatal(err)
			}
			for b.Loop() {
				clk.Advance(time.Second) // each plan writes a new record, as a real one does
				out, err := c.save(st, res, clk)
				if err != nil {
					b.Fatal(err)
				}
				if out.Tier.Tier != evidence.Conservative {
					b.Fatalf("tier %s (missing %v): the plan's own boot records were not found", out.Tier.Tier, out.Tier.Missing)
				}
				// Keep "a few records of the plan's subject": without this
				// every iteration would add one more for the next to read.
				b.StopTimer()
				if err := os.Remove(filepath.Join(st.Root, "records", out.RecordDigest+".json")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
			b.ReportMetric(float64(size)/(1<<20), "MB")
		})
	}
}

func benchPlan(b *testing.B) Result {
	b.Helper()
	res, err := Plan(Request{ModelDir: llama(b, 2), GPU: "h100-sxm", Launch: memory.LaunchConfig{MaxModelLen: 8192}, MarginBytes: 1 << 30}, clock())
	if err != nil {
		b.Fatal(err)
	}
	return res
}
