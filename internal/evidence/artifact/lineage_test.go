package artifact_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// small is a tiny Llama-shaped model whose files are cheap to hash.
func small() fixture.Dense {
	return fixture.Dense{
		Source: "test", Architecture: "LlamaForCausalLM", ModelType: "llama",
		Hidden: 64, Intermediate: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 256,
		MaxPositions: 2048, RopeTheta: 10000, DType: "BF16", TorchDType: "bfloat16",
	}
}

func lineageOf(t *testing.T, dir string) artifact.LineageFingerprint {
	t.Helper()
	h := fixture.MustHeaders(t, dir)
	cfg := fixture.MustConfig(t, dir)
	obs, err := artifact.ObserveLocal(dir, artifact.HashSmall, ports.NewFake(time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	lf, err := artifact.Lineage(h, cfg, obs.Files, "")
	if err != nil {
		t.Fatal(err)
	}
	return lf
}

func writeSpec(t *testing.T, spec fixture.Spec) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, spec)
	return dir
}

func TestLineageIgnoresSharding(t *testing.T) {
	a := lineageOf(t, writeSpec(t, fixture.Build(small(), 1)))
	b := lineageOf(t, writeSpec(t, fixture.Build(small(), 3)))
	if !artifact.SameStructure(a, b) || a.TensorSetDigest != b.TensorSetDigest {
		t.Fatalf("1 vs 3 shards: %s vs %s", a.TensorSetDigest, b.TensorSetDigest)
	}
}

func TestLineageIgnoresMetadataBlock(t *testing.T) {
	s1, s2 := fixture.Build(small(), 1), fixture.Build(small(), 1)
	s2.Metadata = map[string]string{"format": "pt", "producer": "someone-else"}
	if a, b := lineageOf(t, writeSpec(t, s1)), lineageOf(t, writeSpec(t, s2)); a.TensorSetDigest != b.TensorSetDigest {
		t.Fatal("__metadata__ changed the tensor set digest")
	}
}

func TestLineageSensitiveToDtype(t *testing.T) {
	f16 := small()
	f16.DType = "F16"
	a := lineageOf(t, writeSpec(t, fixture.Build(small(), 1)))
	b := lineageOf(t, writeSpec(t, fixture.Build(f16, 1)))
	if artifact.SameSchema(a, b) {
		t.Fatal("BF16 and F16 copies have one schema")
	}
}

func TestLineageConfigTieBreak(t *testing.T) {
	other := small()
	other.RopeTheta = 500000
	a := lineageOf(t, writeSpec(t, fixture.Build(small(), 1)))
	b := lineageOf(t, writeSpec(t, fixture.Build(other, 1)))
	if !artifact.SameSchema(a, b) {
		t.Fatal("equal tensors must be the same schema")
	}
	if artifact.SameStructure(a, b) {
		t.Fatal("different rope_theta must not be the same structure")
	}
}

// Provenance keys (_name_or_path, transformers_version, _commit_hash) at
// any depth do not change the structural digest.
func TestConfigDigestIgnoresProvenance(t *testing.T) {
	a := []byte(`{"hidden_size":64,"_name_or_path":"a/b","text_config":{"transformers_version":"4.40.0","x":1}}`)
	b := []byte(`{"text_config":{"x":1,"transformers_version":"4.51.0","_commit_hash":"abc"},"hidden_size":64,"_name_or_path":"c/d"}`)
	da, ra := artifact.ConfigStructDigest(a)
	db, rb := artifact.ConfigStructDigest(b)
	if da == nil || db == nil || *da != *db {
		t.Fatalf("digests %v %v (%s %s)", da, db, ra, rb)
	}
	want, _ := canon.Canonicalize([]byte(`{"hidden_size":64,"text_config":{"x":1}}`))
	if *da != canon.Digest(want) {
		t.Errorf("digest is not the JCS digest of the stripped config")
	}
}

func TestConfigDigestStrict(t *testing.T) {
	for name, cfg := range map[string]string{
		"nan":       `{"rope_theta": NaN}`,
		"infinity":  `{"x": Infinity}`,
		"big int":   `{"x": 9007199254740993}`,
		"duplicate": `{"x": 1, "x": 2}`,
		"array":     `[1]`,
	} {
		d, reason := artifact.ConfigStructDigest([]byte(cfg))
		if d != nil || reason == "" {
			t.Errorf("%s: digest %v reason %q", name, d, reason)
		}
	}
	dir := writeSpec(t, fixture.Spec{Tensors: []fixture.Tensor{{Name: "w", DType: "F16", Shape: []int64{2}}},
		Files: map[string][]byte{"config.json": []byte(`{"rope_theta": NaN}`)}})
	lf := lineageOf(t, dir)
	if lf.ConfigStructDigest != nil || lf.ConfigStructNullReason == nil || !strings.Contains(*lf.ConfigStructNullReason, "not strict JSON") {
		t.Fatalf("lineage %+v", lf)
	}
}

func TestTokenizerNotInLineage(t *testing.T) {
	s1, s2 := fixture.Build(small(), 1), fixture.Build(small(), 1)
	s1.Files = map[string][]byte{"tokenizer.json": []byte(`{"v":1}`)}
	s2.Files = map[string][]byte{"tokenizer.json": []byte(`{"v":2}`)}
	a, b := lineageOf(t, writeSpec(t, s1)), lineageOf(t, writeSpec(t, s2))
	if a.TokenizerDigest == nil || b.TokenizerDigest == nil || *a.TokenizerDigest == *b.TokenizerDigest {
		t.Fatalf("tokenizer digests not recorded or equal: %v %v", a.TokenizerDigest, b.TokenizerDigest)
	}
	if !artifact.SameStructure(a, b) {
		t.Fatal("a different tokenizer changed lineage")
	}
	fa, _ := canon.Marshal(evidence.IdentityProjection(a))
	fb, _ := canon.Marshal(evidence.IdentityProjection(b))
	if string(fa) != string(fb) {
		t.Fatal("tokenizer digest reached the lineage fingerprint's identity projection")
	}
}

func TestSameSchemaIsNotIdentity(t *testing.T) {
	// Same tensor schema and config, different weight bytes.
	d1, d2 := writeSpec(t, fixture.Build(small(), 1)), writeSpec(t, fixture.Build(small(), 1))
	f, err := os.OpenFile(filepath.Join(d2, artifact.SingleFile), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.WriteAt([]byte{1, 2, 3}, st.Size()-3)
	f.Close()
	a, b := lineageOf(t, d1), lineageOf(t, d2)
	if !artifact.SameStructure(a, b) {
		t.Fatal("lineage must be equal")
	}
	ia := identityAll(t, d1)
	ib := identityAll(t, d2)
	if ia.ContentDigest == ib.ContentDigest {
		t.Fatal("different weights, one identity")
	}
}

func TestAWQChangesSchema(t *testing.T) {
	base := fixture.Build(small(), 1)
	awq := fixture.Must(fixture.AWQ(base, 32))
	a, b := lineageOf(t, writeSpec(t, base)), lineageOf(t, writeSpec(t, awq))
	if artifact.SameSchema(a, b) {
		t.Fatal("AWQ conversion kept the schema")
	}
}

func TestTensorSetDigestVector(t *testing.T) {
	ts := []artifact.Tensor{{Name: "b", DType: "F16", Shape: []int64{2, 3}}, {Name: "a", DType: "BF16", Shape: nil}}
	d, err := artifact.TensorSetDigest(ts)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"narwhal.lineage.tensor_set","tensors":[["a","BF16",[]],["b","F16",[2,3]]],"version":1}`
	if d != canon.Digest([]byte(want)) {
		t.Fatalf("tensor set digest is not the digest of %s", want)
	}
	var back any
	if json.Unmarshal([]byte(want), &back) != nil {
		t.Fatal("vector is not JSON")
	}
}
