package planner

import (
	"bytes"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func llama(t testing.TB, shards int) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := fixture.Write(dir, fixture.Build(fixture.Llama31_8B(), shards)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func clock() ports.Clock { return ports.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) }

func plan(t *testing.T, req Request) Result {
	t.Helper()
	res, err := Plan(req, clock())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The tier comes from the store: a prediction alone is Candidate; a
// measured healthy boot of the same artifact on the same hardware class
// makes it Conservative; a boot on other hardware does not.
func TestTierFromTheStore(t *testing.T) {
	req := Request{ModelDir: llama(t, 2), GPU: "h100-sxm", Launch: memory.LaunchConfig{MaxModelLen: 8192}}
	res := plan(t, req)
	if res.Prediction.Status != memory.PredictionKnown || !res.Prediction.Fits {
		t.Fatalf("8B on an H100 should be a known fit: %+v", res.Prediction.UnknownReasons)
	}
	st := store.Open(t.TempDir())
	out, err := Save(st, res, clock())
	if err != nil {
		t.Fatal(err)
	}
	if out.Tier.Tier != evidence.Candidate {
		t.Fatalf("tier %s (missing %v), want candidate from the prediction alone", out.Tier.Tier, out.Tier.Missing)
	}
	boot := func(hw string) {
		v := evidence.VerdictHealthy
		r := evidence.Stamp(evidence.Record{Kind: evidence.KindBoot, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured,
			Level: evidence.MaintainerLabMeasured, Subject: map[string]string{evidence.SubjectArtifact: res.ArtifactSubject(), evidence.SubjectHardwareClass: hw},
			Claim: evidence.Claim{Quantity: "boot", Verdict: &v, Unit: ""}, Engine: evidence.Engine{Name: "vllm", Version: "0.11.0", Packages: []string{}},
			Provenance: evidence.Provenance{Producer: "test", Inputs: []string{}}, Display: map[string]any{}}, clock())
		if _, err := st.PutRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	boot("a100-80gb/81224mib/cc8.0/x1")
	if out, _ = Save(st, res, clock()); out.Tier.Tier != evidence.Candidate {
		t.Errorf("a boot on other hardware made the tier %s", out.Tier.Tier)
	}
	boot(res.HardwareClass())
	if out, _ = Save(st, res, clock()); out.Tier.Tier != evidence.Conservative {
		t.Errorf("tier %s (missing %v) with a boot on the same hardware class, want conservative", out.Tier.Tier, out.Tier.Missing)
	}
}

// Same inputs, same clock: byte-identical record (INV-42).
func TestRecordByteIdentical(t *testing.T) {
	dir := llama(t, 3)
	var bs [2][]byte
	for i := range bs {
		res := plan(t, Request{ModelDir: dir, GPU: "a100-80gb"})
		rec, err := res.Record(clock())
		if err != nil {
			t.Fatal(err)
		}
		if bs[i], err = canon.Marshal(rec); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(bs[0], bs[1]) {
		t.Fatal("two plans of the same input gave different records")
	}
}

// A model that cannot fit is a plan, not an error: verdict does_not_fit.
func TestDoesNotFitIsARecord(t *testing.T) {
	res := plan(t, Request{ModelDir: llama(t, 1), GPUMemoryGiB: 12})
	rec, err := res.Record(clock())
	if err != nil {
		t.Fatal(err)
	}
	if res.Prediction.Fits || rec.Claim.Verdict == nil || *rec.Claim.Verdict != "does_not_fit" {
		t.Errorf("8B (15 GiB of weights) on 12 GiB: fits %v, verdict %v", res.Prediction.Fits, rec.Claim.Verdict)
	}
}

// BenchmarkPlan405B is the whole plan of a 30-shard 405B-like checkpoint:
// header reading, identity of the small files, quantization, the
// calculator and the execution fingerprint.
func BenchmarkPlan405B(b *testing.B) {
	dir := b.TempDir()
	if _, err := fixture.Write(dir, fixture.Build(fixture.Llama31_405B(), 30)); err != nil {
		b.Fatal(err)
	}
	req := Request{ModelDir: dir, GPU: "h200", Launch: memory.LaunchConfig{TP: 8, MaxModelLen: 32768}}
	for b.Loop() {
		if _, err := Plan(req, clock()); err != nil {
			b.Fatal(err)
		}
	}
}
