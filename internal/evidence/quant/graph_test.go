package quant_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
	"github.com/narwhal-go/narwhal/internal/ports"
)

var clock = ports.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))

// specOf writes spec into a directory and builds its ArtifactSpec the way
// the plan command will: headers, config, observation, detection.
func specOf(t *testing.T, s fixture.Spec) quant.ArtifactSpec {
	t.Helper()
	dir := t.TempDir()
	if _, err := fixture.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	return specOfDir(t, dir)
}

func specOfDir(t *testing.T, dir string) quant.ArtifactSpec {
	t.Helper()
	h := fixture.MustHeaders(t, dir)
	config := fixture.MustConfig(t, dir)
	qc, found, err := artifact.ReadQuantConfig(dir, config)
	if err != nil {
		t.Fatal(err)
	}
	var c *quant.Config
	var qcp *artifact.QuantConfig
	if found {
		cc, err := quant.ConfigFrom(qc)
		if err != nil {
			t.Fatal(err)
		}
		c, qcp = &cc, &qc
	}
	q, v := quant.Detect(c, h, quant.Methods())
	if v.Support == quant.Unsupported {
		t.Fatalf("detect: %s", v.Reason)
	}
	obs, err := artifact.ObserveLocal(dir, artifact.HashAll, clock)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := quant.NewArtifactSpec(quant.SpecInputs{Observation: obs, Headers: h, Config: config, QuantConfig: qcp, Quantization: q})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func digestOf(s string) string { return canon.Digest([]byte(fmt.Sprintf("%q", s))) }

func TestArtifactSpecFromDirectory(t *testing.T) {
	s := fixture.Build(tiny(), 2)
	s.Files = map[string][]byte{"tokenizer.json": []byte(`{"t":1}`), "chat_template.jinja": []byte("{{ x }}")}
	dir := t.TempDir()
	fixture.Write(dir, s)
	spec := specOfDir(t, dir)
	if spec.IndexDigest == nil || spec.TokenizerIdentity == nil || spec.ChatTemplateIdentity == nil || spec.QuantizationConfigDigest != nil {
		t.Fatalf("%+v", spec)
	}
	b1, err := canon.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := canon.Marshal(specOfDir(t, dir))
	if string(b1) != string(b2) {
		t.Fatal("same checkpoint, same clock, different ArtifactSpec bytes")
	}
	fa, _ := quant.Fingerprint(spec)
	fb, _ := quant.Fingerprint(specOf(t, s)) // another location
	if fa != fb {
		t.Fatal("the same files at another location changed the fingerprint")
	}
	awq := specOf(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	if awq.QuantizationConfigDigest == nil || awq.Quantization.Method != "awq" {
		t.Fatalf("awq spec %+v", awq.Quantization)
	}
}

// A spec that is only a method name is refused; the full record decodes.
func TestNoQuantizationString(t *testing.T) {
	for _, in := range []string{`"awq"`, `{"quantization":"awq"}`, `{"method":"awq","weight_format":"int4"}`} {
		if _, err := quant.DecodeQuantizationSpec([]byte(in)); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
	spec, _ := quant.Detect(cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":128}`), fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128))), quant.Methods())
	b, err := canon.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := quant.DecodeQuantizationSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := canon.Marshal(back)
	if string(b) != string(b2) {
		t.Fatal("round trip changed the spec")
	}
}

func TestWorkspaceIsNotIdentity(t *testing.T) {
	spec, _ := quant.Detect(cfg(t, "config.json", `{"quant_method":"awq","bits":4,"group_size":128}`), fixture.InMemory(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128))), quant.Methods())
	other := spec
	other.Workspaces = nil
	a, _ := quant.Fingerprint(spec)
	b, _ := quant.Fingerprint(other)
	if a != b {
		t.Fatal("derived workspace facts reached the spec's fingerprint")
	}
	other.GroupSize = ptr(64)
	if c, _ := quant.Fingerprint(other); c == a {
		t.Fatal("group size is identity")
	}
}

func ptr[T any](v T) *T { return &v }

func TestOfflineConversionNewArtifact(t *testing.T) {
	base := specOf(t, fixture.Build(tiny(), 1))
	out := specOf(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	tr := quant.OfflineTransformSpec{Producer: "autoawq", Version: "0.2.6"}
	c, bound, err := quant.OfflineConversion(base, tr, out)
	if err != nil {
		t.Fatal(err)
	}
	outFP, _ := quant.Fingerprint(out)
	baseFP, _ := quant.Fingerprint(base)
	if c.Class != quant.ReproducibleOfflineConversion || c.Artifact != outFP || c.Artifact == baseFP || bound.OutputArtifact == nil || *bound.OutputArtifact != outFP || c.ProducedBy == nil {
		t.Fatalf("%+v %+v", c, bound)
	}
	if _, _, err := quant.OfflineConversion(base, tr, base); err == nil {
		t.Fatal("a conversion whose output is its input accepted")
	}
	// A conversion links back only through a reproduction whose identity matches.
	if _, err := quant.ReproducedRelation(base, out, bound, base.Identity, digestOf("run")); err == nil {
		t.Fatal("reproduced_from with a different identity accepted")
	}
	r, err := quant.ReproducedRelation(base, out, bound, out.Identity, digestOf("run"))
	if err != nil || r.Kind != quant.ReproduciblyDerivedFrom || r.From != outFP || r.To != baseFP {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestRuntimeTransformNoArtifact(t *testing.T) {
	base := specOf(t, fixture.Build(tiny(), 1))
	rt, _, v := quant.RuntimeFP8("0.11.0", nil, artifactHeaders(t, base))
	if v.Support != quant.Supported {
		t.Fatal(v.Reason)
	}
	c, err := quant.RuntimeCandidate(base, rt)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := quant.Fingerprint(base)
	if c.Class != quant.RuntimeTransform || c.Artifact != fp || c.ProducedBy != nil {
		t.Fatalf("%+v", c)
	}
	unpinned := rt
	unpinned.EngineVersion = nil
	if _, err := quant.RuntimeCandidate(base, unpinned); err == nil {
		t.Fatal("a runtime transform without a pinned engine accepted")
	}
	if _, err := quant.CheckpointCandidate(quant.RuntimeTransform, base); err == nil {
		t.Fatal("runtime class without its transform accepted")
	}
}

func artifactHeaders(t *testing.T, s quant.ArtifactSpec) artifact.Headers {
	h, err := artifact.ReadHeaders(s.Locators[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRelationNeedsEvidence(t *testing.T) {
	a, b := digestOf("a"), digestOf("b")
	for _, r := range []quant.ArtifactRelation{
		{Kind: quant.StructurallyCompatibleWith, From: a, To: b},
		{Kind: quant.StructurallyCompatibleWith, From: a, To: b, Evidence: []string{"not-a-digest"}},
		{Kind: quant.ClaimedDerivedFrom, From: a, To: b, Evidence: []string{digestOf("card")}}, // no attribution
		{Kind: quant.StructurallyCompatibleWith, From: a, To: a, Evidence: []string{digestOf("x")}},
		{Kind: "looks_like", From: a, To: b, Evidence: []string{digestOf("x")}},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	ok := quant.ArtifactRelation{Kind: quant.ClaimedDerivedFrom, From: a, To: b, Evidence: []string{digestOf("card")},
		Attribution: &artifact.AttributedClaim{Claim: "base_model", Value: "meta-llama/Llama-3.1-8B", Source: "model_card"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Two artifacts whose locations read like siblings but whose schemas
// differ get no relation; the same schema gets only the structural one.
func TestNameSimilarityCreatesNoRelation(t *testing.T) {
	base := specOf(t, fixture.Build(tiny(), 1))
	awq := specOf(t, fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128)))
	base.Locators[0].URI, awq.Locators[0].URI = "/models/Llama-3.1-8B", "/models/Llama-3.1-8B-AWQ"
	rs, err := quant.Relate(base, awq)
	if err != nil || len(rs) != 0 {
		t.Fatalf("relations %+v %v", rs, err)
	}
	resharded := specOf(t, fixture.Build(tiny(), 3))
	rs, err = quant.Relate(base, resharded)
	if err != nil || len(rs) != 1 || rs[0].Kind != quant.StructurallyCompatibleWith {
		t.Fatalf("same schema: %+v %v", rs, err)
	}
	// published_by_owner needs the locator under a lineage publisher's namespace.
	lin := quant.ModelLineage{Family: "llama-3.1", Publishers: []string{"meta-llama"}}
	hf := artifact.Locator{SourceKind: artifact.SourceHuggingFace, URI: "meta-llama-fan/Llama-3.1-8B"}
	if _, err := quant.OwnerRelation(awq, base, lin, hf, digestOf("obs"), ""); err == nil {
		t.Fatal("a look-alike namespace made a published_by_owner edge")
	}
	hf.URI = "meta-llama/Llama-3.1-8B"
	if _, err := quant.OwnerRelation(awq, base, lin, hf, digestOf("obs"), ""); err != nil {
		t.Fatal(err)
	}
}

func TestTokenizerRelation(t *testing.T) {
	s := fixture.Build(tiny(), 1)
	s.Files = map[string][]byte{"tokenizer.json": []byte(`{"t":1}`)}
	a := specOf(t, s)
	q := fixture.Must(fixture.AWQ(fixture.Build(tiny(), 1), 128))
	q.Files = s.Files
	b := specOf(t, q)
	rs, err := quant.Relate(a, b)
	if err != nil || len(rs) != 1 || rs[0].Kind != quant.TokenizerCompatibleWith {
		t.Fatalf("%+v %v", rs, err)
	}
}

func TestQualityEvidenceNeedsAttempts(t *testing.T) {
	d := digestOf
	if _, err := quant.NewQualityEvidence(d("c"), d("e"), nil, d("app"), d("proto"), nil); err == nil || !strings.Contains(err.Error(), "no task attempts") {
		t.Fatalf("%v", err)
	}
	q, err := quant.NewQualityEvidence(d("c"), d("e"), []string{d("2"), d("1"), d("2")}, d("app"), d("proto"), nil)
	if err != nil || len(q.TaskAttemptFingerprints) != 2 {
		t.Fatalf("%+v %v", q, err)
	}
	c := quant.CompatibilityEvidence{CandidateFingerprint: d("c"), ExecutionFingerprint: d("e"), State: "boot_verified", Compatible: false}
	if c.Validate() == nil {
		t.Fatal("incompatible without a failure fingerprint accepted")
	}
}

// Relations read only digests; nothing here touches the clock, and the
// spec of a directory copied elsewhere keeps its fingerprint.
func TestSpecFingerprintIgnoresLocation(t *testing.T) {
	s := fixture.Build(tiny(), 1)
	a := specOf(t, s)
	dir := t.TempDir()
	fixture.Write(dir, s)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("card"), 0o644)
	h, _ := artifact.ReadHeaders(dir)
	config, _ := artifact.ReadConfig(dir)
	obs, _ := artifact.ObserveLocal(dir, artifact.HashAll, clock)
	b, err := quant.NewArtifactSpec(quant.SpecInputs{Observation: obs, Headers: h, Config: config, Quantization: a.Quantization})
	if err != nil {
		t.Fatal(err)
	}
	fa, _ := quant.Fingerprint(a)
	fb, _ := quant.Fingerprint(b)
	if fa != fb {
		t.Fatal("location or README changed the artifact fingerprint")
	}
}
