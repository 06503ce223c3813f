package memory

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestLoadFactsVersions(t *testing.T) {
	cases := []struct{ version, label string }{
		{"0.8.5", "0.8"}, {"0.9.2", "0.9"}, {"0.10.1", "0.10"}, {"0.11.0", "0.10"}, {"v0.11.2", "0.10"}, {"0.11", "0.10"}, {"0.21.0", "0.21"},
	}
	for _, c := range cases {
		f, d, err := LoadFacts(c.version)
		if err != nil || f.Version != c.label || !strings.HasPrefix(d, "1220") {
			t.Errorf("%s: %s %s %v", c.version, f.Version, d, err)
		}
		if len(f.RuleSets) == 0 || len(f.Params) == 0 {
			t.Errorf("%s: shared rules not resolved into the entry", c.version)
		}
	}
	// The digest covers the rules: changing one rule changes it.
	f, d, _ := LoadFacts("0.11.0")
	g := f
	g.RuleSets = append([]RuleSet{}, f.RuleSets...)
	g.RuleSets[0].Rules = append([]ShardRule{}, f.RuleSets[0].Rules...)
	g.RuleSets[0].Rules[0].Kind = "replicated"
	if d2, _ := FactsDigest(g); d2 == d {
		t.Fatal("the facts digest ignores the sharding rules")
	}
}

// TestLoadFactsVersionFallback: a version no pinned range covers gets the
// nearest range with Fallback set (never refused); only a malformed
// version is an error.
func TestLoadFactsVersionFallback(t *testing.T) {
	cases := []struct {
		version, label string
		dist           int
	}{
		{"0.11.0", "0.10", 0},
		{"0.14.0", "0.10", 3},
		{"0.19.1", "0.10", 8},
		{"0.1.0", "0.6", 5},
		{"0.7.3", "0.6", 0},
		{"0.33.0", "0.21", 12},
		{"0.40", "0.21", 19},
	}
	for _, c := range cases {
		f, d, err := LoadFacts(c.version)
		if err != nil || f.Version != c.label || d == "" {
			t.Errorf("%s: facts %s digest %q err %v, want %s", c.version, f.Version, d, err, c.label)
			continue
		}
		got := 0
		if f.Fallback != nil {
			got = f.Fallback.Distance
		}
		if got != c.dist {
			t.Errorf("%s: fallback distance %d, want %d", c.version, got, c.dist)
		}
		if n := f.FallbackNote(); (c.dist > 0) != strings.Contains(n, "planned with the facts of "+c.label) {
			t.Errorf("%s: note %q", c.version, n)
		}
		if _, pinned, _ := LoadFacts(f.MinVersion); pinned != d {
			t.Errorf("%s: the digest is not the pinned entry's", c.version)
		}
	}
	for _, v := range []string{"banana", "latest", ""} {
		_, _, err := LoadFacts(v)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "give a release such as") {
			t.Errorf("%q: err %v, want a one-line error saying how to fix it", v, err)
		}
	}
}

// TestFactsCiteSources: every Source field names a source the file lists
// with a URL, and every rule set's family is one the dispatch table uses.
func TestFactsCiteSources(t *testing.T) {
	ff, err := parseFactsFile(factsJSON)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, s := range ff.Sources {
		if s.URL == "" || s.Note == "" {
			t.Errorf("source %s lacks a URL or note", s.Key)
		}
		keys[s.Key] = true
	}
	fams := map[string]bool{}
	for _, f := range families {
		fams[f.name] = true
	}
	for _, rs := range ff.RuleSets {
		if !keys[rs.Source] {
			t.Errorf("rule set %s cites unknown source %q", rs.Family, rs.Source)
		}
		if !fams[rs.Family] {
			t.Errorf("rule set %s is not a dispatched family", rs.Family)
		}
		delete(fams, rs.Family)
	}
	for f := range fams {
		t.Errorf("family %s has no sharding rules", f)
	}
	for _, e := range ff.Entries {
		for what, src := range map[string]string{"accounting": e.Accounting.Source, "defaults": e.Defaults.Source, "kv": e.KV.Source, "weights": e.Weights.Source} {
			if !keys[src] {
				t.Errorf("%s %s cites unknown source %q", e.Version, what, src)
			}
		}
	}
}

func TestFactsFileStrict(t *testing.T) {
	bad := bytes.Replace(factsJSON, []byte(`"schema_version": 1,`), []byte(`"schema_version": 1, "surprise": true,`), 1)
	if _, err := parseFactsFile(bad); err == nil {
		t.Fatal("unknown field accepted")
	}
	if _, err := parseFactsFile(bytes.Replace(factsJSON, []byte(`"narwhal.memory.engine_facts"`), []byte(`"x"`), 1)); err == nil {
		t.Fatal("wrong schema accepted")
	}
}

func TestBatchDefaults(t *testing.T) {
	f := mustFacts(t, "0.11.0")
	cases := []struct {
		gpu          string
		tokens, seqs int64
	}{
		{"H100", 8192, 1024}, {"H200", 8192, 1024}, {"A100-80GB", 2048, 256}, {"L40S", 2048, 256}, {"RTX-4090", 2048, 256},
	}
	for _, c := range cases {
		b := batchDefault(f.Defaults.Batch, mustGPU(t, c.gpu))
		if b.MaxNumBatchedTokens != c.tokens || b.MaxNumSeqs != c.seqs {
			t.Errorf("%s: %d/%d, want %d/%d", c.gpu, b.MaxNumBatchedTokens, b.MaxNumSeqs, c.tokens, c.seqs)
		}
	}
	// 0.8: by name only — an H100 gets the large defaults, an unnamed
	// 80 GiB card does not.
	old := mustFacts(t, "0.8.5")
	if b := batchDefault(old.Defaults.Batch, mustGPU(t, "H100")); b.MaxNumSeqs != 1024 {
		t.Errorf("0.8 H100: %+v", b)
	}
	if b := batchDefault(old.Defaults.Batch, HardwareSpec{TotalMemoryBytes: 80 << 30}); b.MaxNumSeqs != 256 {
		t.Errorf("0.8 unnamed card: %+v", b)
	}
}

func TestLookupGPU(t *testing.T) {
	for _, name := range []string{"H100", "h100-sxm", "NVIDIA H100 80GB HBM3", "a100_80gb", "RTX 4090", "mi300x"} {
		if _, err := LookupGPU(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := LookupGPU("H1OO")
	if err == nil || !strings.Contains(err.Error(), "--gpu-memory-gib") || !strings.Contains(err.Error(), "H100") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("unknown GPU error %v", err)
	}
	for _, g := range GPUs() {
		if g.TotalMemoryBytes <= 0 || g.Source == "" || (g.Basis != BasisVLLMLog && g.Basis != BasisNominal) || g.ComputeCapability == "" {
			t.Errorf("%s: incomplete row %+v", g.Name, g)
		}
	}
	if !strings.HasPrefix(GPUTableDigest(), "1220") {
		t.Fatal("no GPU table digest")
	}
	h := HardwareFor(mustGPUTable(t, "H100"), 8)
	if !reflect.DeepEqual(h, HardwareSpec{Name: "H100-SXM-80GB", DeviceName: "NVIDIA H100 80GB HBM3", TotalMemoryBytes: 85018877624, MemoryBasis: BasisVLLMLog, ComputeCapability: "9.0", Count: 8}) {
		t.Fatalf("%+v", h)
	}
}

func mustGPUTable(t *testing.T, name string) GPU {
	t.Helper()
	g, err := LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
