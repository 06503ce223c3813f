package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusCase is a sidecar: what a corpus log must diagnose as.
type corpusCase struct {
	Status  Status `json:"status"`
	Family  Family `json:"family"`
	Wording string `json:"wording"`
	// Group names a fingerprint equality class: every log of a group
	// must give the same fingerprint (the same failure across runs and
	// across V0/V1 wordings), and recognized groups differ from each other.
	Group   string `json:"group"`
	Options struct {
		GPU         string `json:"gpu"`
		ModelMaxLen *int64 `json:"model_max_len"`
	} `json:"options"`
	// Facts is a subset of the expected Facts (null: must be absent).
	Facts    map[string]json.RawMessage `json:"facts"`
	Rejected []Rejection                `json:"rejected"`
}

type corpusResult struct {
	name string
	c    corpusCase
	d    Diagnosis
}

func loadCorpus(t *testing.T) []corpusResult {
	t.Helper()
	logs, err := filepath.Glob("testdata/corpus/*.log")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(logs)
	var out []corpusResult
	for _, lf := range logs {
		name := strings.TrimSuffix(filepath.Base(lf), ".log")
		raw, err := os.ReadFile(strings.TrimSuffix(lf, ".log") + ".json")
		if err != nil {
			t.Fatalf("%s: no sidecar: %v", name, err)
		}
		var c corpusCase
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s.json: %v", name, err)
		}
		f, err := os.Open(lf)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Diagnose(f, Options{GPU: c.Options.GPU, ModelMaxLen: c.Options.ModelMaxLen})
		f.Close()
		if err != nil {
			t.Fatalf("%s: Diagnose: %v", name, err)
		}
		out = append(out, corpusResult{name, c, d})
	}
	return out
}

func TestCorpus(t *testing.T) {
	results := loadCorpus(t)
	if len(results) < 40 {
		t.Fatalf("corpus has %d logs, want at least 40", len(results))
	}
	for _, r := range results {
		t.Run(r.name, func(t *testing.T) {
			c, d := r.c, r.d
			if d.Status != c.Status || d.Family != c.Family || string(d.Wording) != c.Wording {
				t.Errorf("got %s/%s/%s, want %s/%s/%s", d.Status, d.Family, d.Wording, c.Status, c.Family, c.Wording)
			}
			if d.Fingerprint.Family != d.Family {
				t.Errorf("fingerprint family %s, diagnosis family %s", d.Fingerprint.Family, d.Family)
			}
			got := factsJSON(t, d.Facts)
			for k, want := range c.Facts {
				g, ok := got[k]
				if !ok {
					t.Errorf("sidecar names fact %q, which Facts does not have", k)
					continue
				}
				if !jsonEqual(t, g, want) {
					t.Errorf("fact %s = %s, want %s", k, g, want)
				}
			}
			if c.Rejected == nil {
				c.Rejected = []Rejection{}
			}
			if diff := cmp.Diff(c.Rejected, d.Rejected); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCorpusFingerprintGroups: one fingerprint per group (stable across
// runs with other numbers, paths and pids, and across V0/V1 wordings), and
// distinct recognized groups have distinct fingerprints.
func TestCorpusFingerprintGroups(t *testing.T) {
	byGroup := map[string][]corpusResult{}
	for _, r := range loadCorpus(t) {
		byGroup[r.c.Group] = append(byGroup[r.c.Group], r)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	owner := map[string]string{}
	multi := 0
	for _, g := range groups {
		rs := byGroup[g]
		if len(rs) > 1 {
			multi++
		}
		for _, r := range rs[1:] {
			if r.d.FingerprintDigest != rs[0].d.FingerprintDigest {
				t.Errorf("group %s: %s fingerprint %+v differs from %s %+v", g, r.name, fpText(r.d.Fingerprint), rs[0].name, fpText(rs[0].d.Fingerprint))
			}
		}
		if rs[0].d.Status != StatusRecognized {
			continue
		}
		if o, ok := owner[rs[0].d.FingerprintDigest]; ok && !(g == "nixl" || o == "nixl") {
			t.Errorf("groups %s and %s share a fingerprint", o, g)
		}
		owner[rs[0].d.FingerprintDigest] = g
	}
	if multi < 15 {
		t.Errorf("only %d groups have more than one log; stability needs pairs", multi)
	}
}

func fpText(f Fingerprint) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func factsJSON(t *testing.T, f Facts) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func diagnoseFile(t *testing.T, path string, opt Options) Diagnosis {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := Diagnose(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
