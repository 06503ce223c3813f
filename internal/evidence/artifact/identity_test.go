package artifact_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

var clock = ports.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))

func identityAll(t *testing.T, dir string) artifact.Identity {
	t.Helper()
	o, err := artifact.ObserveLocal(dir, artifact.HashAll, clock)
	if err != nil {
		t.Fatal(err)
	}
	if o.Identity == nil {
		t.Fatalf("unresolved: %s", o.Reason)
	}
	return *o.Identity
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

func TestSameBytesTwoLocationsOneIdentity(t *testing.T) {
	a := writeSpec(t, fixture.Build(small(), 2))
	b := copyDir(t, a)
	oa, _ := artifact.ObserveLocal(a, artifact.HashAll, clock)
	ob, _ := artifact.ObserveLocal(b, artifact.HashAll, clock)
	if oa.Identity == nil || ob.Identity == nil || oa.Identity.ContentDigest != ob.Identity.ContentDigest {
		t.Fatalf("identities %v %v", oa.Identity, ob.Identity)
	}
	if oa.Locator.URI == ob.Locator.URI {
		t.Fatal("two locations must stay two locators")
	}
	fa, _ := canon.Marshal(evidence.IdentityProjection(*oa.Identity))
	fb, _ := canon.Marshal(evidence.IdentityProjection(*ob.Identity))
	if string(fa) != string(fb) {
		t.Fatal("identity fingerprints differ")
	}
}

func TestSameNameChangedBytesNewIdentity(t *testing.T) {
	a := writeSpec(t, fixture.Build(small(), 1))
	b := copyDir(t, a)
	os.WriteFile(filepath.Join(b, "config.json"), []byte(`{"hidden_size":65}`), 0o644)
	if identityAll(t, a).ContentDigest == identityAll(t, b).ContentDigest {
		t.Fatal("changed bytes under the same names kept the identity")
	}
}

func TestIdentityIgnoresReadme(t *testing.T) {
	a := writeSpec(t, fixture.Build(small(), 1))
	b := copyDir(t, a)
	os.WriteFile(filepath.Join(b, "README.md"), []byte("# a model card edit"), 0o644)
	os.MkdirAll(filepath.Join(b, ".cache", "huggingface"), 0o755)
	os.WriteFile(filepath.Join(b, ".cache", "huggingface", ".gitignore"), []byte("*"), 0o644)
	if identityAll(t, a).ContentDigest != identityAll(t, b).ContentDigest {
		t.Fatal("README.md or .cache/huggingface changed the identity")
	}
	c := copyDir(t, a)
	os.MkdirAll(filepath.Join(c, "docs"), 0o755)
	os.WriteFile(filepath.Join(c, "docs", "README.md"), []byte("nested readme"), 0o644)
	if identityAll(t, a).ContentDigest == identityAll(t, c).ContentDigest {
		t.Fatal("only the root README.md is excluded")
	}
}

func TestFileRuleVersioned(t *testing.T) {
	id := identityAll(t, writeSpec(t, fixture.Build(small(), 1)))
	if artifact.FileRuleV1 != "narwhal.v1" || id.FileRule != artifact.FileRuleV1 {
		t.Fatalf("file rule %q", id.FileRule)
	}
	other := id
	other.FileRule = "narwhal.v2"
	fa, _ := canon.Marshal(evidence.IdentityProjection(id))
	fb, _ := canon.Marshal(evidence.IdentityProjection(other))
	if string(fa) == string(fb) {
		t.Fatal("file_rule is not part of the identity fingerprint")
	}
}

func TestLocalDirectoryRevisionIsContent(t *testing.T) {
	o, err := artifact.ObserveLocal(writeSpec(t, fixture.Build(small(), 1)), artifact.HashAll, clock)
	if err != nil || o.Observation == nil {
		t.Fatal(err, o.Reason)
	}
	if o.Observation.ResolvedRevision != "content:"+o.Identity.ContentDigest {
		t.Fatalf("revision %q", o.Observation.ResolvedRevision)
	}
	if o.Observation.ObservedAt != "2026-12-01T00:00:00Z" {
		t.Errorf("observed_at %q is not from the clock port", o.Observation.ObservedAt)
	}
	id, err := o.Locator.Resolve(o.Observation)
	if err != nil || id != *o.Identity {
		t.Fatalf("resolve: %v %v", id, err)
	}
}

func TestLocatorWithoutResolutionRejected(t *testing.T) {
	rev := "main"
	hf := artifact.Locator{SchemaVersion: 1, SourceKind: artifact.SourceHuggingFace, URI: "meta-llama/Llama-3.1-8B", RequestedRevision: &rev}
	if _, err := hf.Resolve(nil); !errors.Is(err, artifact.ErrUnresolved) {
		t.Fatalf("no observation: %v", err)
	}
	files := []artifact.FileDigest{{Path: "config.json", SHA256: strings.Repeat("a", 64), SizeBytes: 10}}
	mutable := &artifact.SourceObservation{SourceKind: artifact.SourceHuggingFace, ResolvedRevision: "main", Files: files}
	if _, err := hf.Resolve(mutable); !errors.Is(err, artifact.ErrUnresolved) {
		t.Fatalf("branch name as revision: %v", err)
	}
	noFiles := &artifact.SourceObservation{SourceKind: artifact.SourceHuggingFace, ResolvedRevision: strings.Repeat("0", 40)}
	if _, err := hf.Resolve(noFiles); !errors.Is(err, artifact.ErrUnresolved) {
		t.Fatalf("no files: %v", err)
	}
	ok := &artifact.SourceObservation{SourceKind: artifact.SourceHuggingFace, ResolvedRevision: strings.Repeat("0", 40), Files: files}
	if _, err := hf.Resolve(ok); err != nil {
		t.Fatalf("commit id with digests: %v", err)
	}
}

// Weight files are never read by default: without a sidecar digest the
// identity is unresolved and says which files and how to fix it.
func TestObserveLocalDefaultDoesNotReadWeights(t *testing.T) {
	dir := writeSpec(t, fixture.Build(fixture.Llama31_70B(), 4))
	o, err := artifact.ObserveLocal(dir, artifact.HashSmall, clock)
	if err != nil {
		t.Fatal(err)
	}
	if o.Identity != nil || o.Observation != nil || len(o.Unresolved) != 4 {
		t.Fatalf("identity %v unresolved %v", o.Identity, o.Unresolved)
	}
	if !strings.Contains(o.Reason, "4 files have no SHA-256") || !strings.Contains(o.Reason, artifact.SumsFile) {
		t.Errorf("reason %q", o.Reason)
	}
}

func TestObserveLocalSumsManifest(t *testing.T) {
	dir := writeSpec(t, fixture.Build(small(), 2))
	var lines []string
	for _, n := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		lines = append(lines, fmt.Sprintf("%s  ./%s", sha(b), n))
	}
	os.WriteFile(filepath.Join(dir, artifact.SumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	o, err := artifact.ObserveLocal(dir, artifact.HashSmall, clock)
	if err != nil || o.Identity == nil {
		t.Fatalf("%v %s", err, o.Reason)
	}
	all := identityAll(t, dir)
	if all.ContentDigest != o.Identity.ContentDigest {
		t.Fatal("sidecar digests and hashing disagree on the identity")
	}
	sources := map[string]artifact.DigestSource{}
	for _, org := range o.Origins {
		sources[org.Path] = org.Source
	}
	if sources["model-00001-of-00002.safetensors"] != artifact.DigestSums || sources["config.json"] != artifact.DigestHashed {
		t.Errorf("origins %v", o.Origins)
	}
}

// The Hugging Face cache names LFS blobs by their SHA-256: a snapshot
// resolves without reading weights, and HashAll checks the name against
// the bytes (a mismatch fails the observation).
func TestLFSOidMatchesDownload(t *testing.T) {
	cache := t.TempDir()
	repo := filepath.Join(cache, "models--org--m")
	rev := strings.Repeat("ab", 20)
	snap := filepath.Join(repo, "snapshots", rev)
	blobs := filepath.Join(repo, "blobs")
	os.MkdirAll(snap, 0o755)
	os.MkdirAll(blobs, 0o755)
	src := writeSpec(t, fixture.Build(small(), 1))
	for _, n := range []string{"config.json", artifact.SingleFile} {
		b, _ := os.ReadFile(filepath.Join(src, n))
		blob := sha(b)
		if n == "config.json" {
			blob = strings.Repeat("c", 40) // small files: git SHA-1 blob names
		}
		os.WriteFile(filepath.Join(blobs, blob), b, 0o644)
		if err := os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, n)); err != nil {
			t.Fatal(err)
		}
	}
	o, err := artifact.ObserveLocal(snap, artifact.HashSmall, clock)
	if err != nil || o.Identity == nil {
		t.Fatalf("%v %s", err, o.Reason)
	}
	if o.HFRevision != rev || len(o.Observation.PublisherClaims) != 1 || o.Observation.PublisherClaims[0].Value != rev {
		t.Errorf("snapshot revision %q claims %v", o.HFRevision, o.Observation.PublisherClaims)
	}
	if identityAll(t, snap).ContentDigest != o.Identity.ContentDigest {
		t.Fatal("blob-name digests disagree with the bytes")
	}
	// Corrupt the blob: the name no longer matches the content.
	b, _ := os.ReadFile(filepath.Join(src, artifact.SingleFile))
	f, _ := os.OpenFile(filepath.Join(blobs, sha(b)), os.O_WRONLY, 0)
	f.WriteAt([]byte{9}, 100)
	f.Close()
	if _, err := artifact.ObserveLocal(snap, artifact.HashAll, clock); err == nil || !strings.Contains(err.Error(), "hf_cache_blob says") {
		t.Fatalf("corrupt blob accepted: %v", err)
	}
}

func TestObserveLocalHFLocalDirMetadata(t *testing.T) {
	dir := writeSpec(t, fixture.Build(small(), 1))
	b, _ := os.ReadFile(filepath.Join(dir, artifact.SingleFile))
	meta := filepath.Join(dir, ".cache", "huggingface", "download")
	os.MkdirAll(meta, 0o755)
	future := float64(time.Now().Add(time.Hour).Unix())
	os.WriteFile(filepath.Join(meta, artifact.SingleFile+".metadata"), fmt.Appendf(nil, "%s\n%s\n%f\n", strings.Repeat("0", 40), sha(b), future), 0o644)
	o, err := artifact.ObserveLocal(dir, artifact.HashSmall, clock)
	if err != nil || o.Identity == nil {
		t.Fatalf("%v %s", err, o.Reason)
	}
	// A download timestamp older than the file: the etag is stale.
	os.WriteFile(filepath.Join(meta, artifact.SingleFile+".metadata"), fmt.Appendf(nil, "%s\n%s\n%f\n", strings.Repeat("0", 40), sha(b), 1000.0), 0o644)
	if o, _ := artifact.ObserveLocal(dir, artifact.HashSmall, clock); o.Identity != nil {
		t.Fatal("stale local_dir metadata trusted")
	}
}

func TestObserveLocalBadSums(t *testing.T) {
	dir := writeSpec(t, fixture.Build(small(), 1))
	os.WriteFile(filepath.Join(dir, artifact.SumsFile), []byte("nothex  model.safetensors\n"), 0o644)
	if _, err := artifact.ObserveLocal(dir, artifact.HashSmall, clock); err == nil || !strings.Contains(err.Error(), "SHA256SUMS line 1") {
		t.Fatalf("%v", err)
	}
}

func TestIdentityByteIdentical(t *testing.T) {
	dir := writeSpec(t, fixture.Build(small(), 2))
	o1, _ := artifact.ObserveLocal(dir, artifact.HashAll, clock)
	o2, _ := artifact.ObserveLocal(dir, artifact.HashAll, ports.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	b1, err := canon.Marshal(o1.Observation)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := canon.Marshal(o2.Observation)
	if string(b1) != string(b2) {
		t.Fatal("same directory, same clock: different observation bytes")
	}
}

func TestComponentStructureDigest(t *testing.T) {
	d1 := canon.Digest([]byte(`1`))
	d2 := canon.Digest([]byte(`2`))
	a, err := artifact.ComponentStructureDigest([]artifact.Component{{Role: "main", ContentDigest: d1}, {Role: "draft", ContentDigest: d2}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := artifact.ComponentStructureDigest([]artifact.Component{{Role: "draft", ContentDigest: d2}, {Role: "main", ContentDigest: d1}})
	if a != b {
		t.Fatal("component order changed the digest")
	}
	if _, err := artifact.ComponentStructureDigest([]artifact.Component{{Role: "main", ContentDigest: "x"}}); err == nil {
		t.Fatal("bad digest accepted")
	}
}
