package diagnose

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/diagnose/plan"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// failureCase is the sidecar of a real failure log in testdata/failures:
// where the log was published and what a reader of it names the failure.
type failureCase struct {
	Source      string `json:"source"`
	Where       string `json:"where"`
	VLLMVersion string `json:"vllm_version"`
	GPU         string `json:"gpu"`
	Family      Family `json:"family"`
	Why         string `json:"why"`
	// DiagnosedAtCollection is what the build of the day said when the log
	// was collected: the history of a miss, not an expectation.
	DiagnosedAtCollection string `json:"diagnosed_at_collection"`
}

// failureResult is one corpus log diagnosed and remedied.
type failureResult struct {
	name string
	c    failureCase
	d    Diagnosis
	r    Remedy
	// kvFit is "" when the log states no KV capacity or the remedy sets no
	// max_model_len, else "ok" or what went wrong.
	kvFit string
}

// The bounds on the real-log corpus (issue 27).
const (
	minFailureLogs     = 80
	minFamilyRightRate = 0.90
)

var sourceURL = regexp.MustCompile(`^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/(issues|pull|discussions)/[0-9]+(#[A-Za-z0-9_-]+)?$`)

func loadFailureCorpus(t *testing.T) []failureResult {
	t.Helper()
	logs, err := filepath.Glob("testdata/failures/*.log")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(logs)
	var out []failureResult
	for _, lf := range logs {
		out = append(out, diagnoseFailureLog(t, lf))
	}
	return out
}

func diagnoseFailureLog(t *testing.T, lf string) failureResult {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(lf), ".log")
	raw, err := os.ReadFile(strings.TrimSuffix(lf, ".log") + ".json")
	if err != nil {
		t.Fatalf("%s: no sidecar: %v", name, err)
	}
	var c failureCase
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	if !sourceURL.MatchString(c.Source) {
		t.Fatalf("%s.json: source %q is not a public GitHub issue, pull request or discussion URL", name, c.Source)
	}
	if !strings.HasPrefix(name, string(c.Family)+"-") {
		t.Fatalf("%s: the file name must start with its expected family %q", name, c.Family)
	}
	opt := Options{}
	if _, err := memory.LookupGPU(c.GPU); c.GPU != "" && err == nil {
		opt.GPU = c.GPU
	}
	f, err := os.Open(lf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := Diagnose(f, opt)
	if err != nil {
		t.Fatalf("%s: Diagnose: %v", name, err)
	}
	base := rtOperatorPlan(t)
	base.Port = 0
	in := Input{Plan: &base}
	if opt.GPU != "" {
		in.GPU = rtGPU(t, opt.GPU)
	}
	r, err := Remediate(d, in)
	if err != nil {
		t.Fatalf("%s: Remediate: %v", name, err)
	}
	return failureResult{name: name, c: c, d: d, r: r, kvFit: kvFit(d, r)}
}

// kvFit checks a KV-cache correction against the capacity the log itself
// states: vLLM's own estimate of the largest model length (V1) or the
// tokens the cache holds (V0). A corrected max_model_len above it would
// fail the same way.
func kvFit(d Diagnosis, r Remedy) string {
	if d.Family != FamilyOOMKVCache {
		return ""
	}
	capacity := d.Facts.EstimatedMaxModelLen
	if capacity == nil {
		capacity = d.Facts.KVCapacityTokens
	}
	if capacity == nil {
		return ""
	}
	set := false
	for _, c := range r.Corrections {
		for _, ch := range c.Changes {
			if ch.Field != plan.FieldMaxModelLen {
				continue
			}
			set = true
			v, err := strconv.ParseInt(ch.To.String(), 10, 64)
			if err != nil || v > *capacity {
				return fmt.Sprintf("max_model_len %s above the logged capacity %d", ch.To.String(), *capacity)
			}
		}
	}
	if !set {
		return "no max_model_len correction"
	}
	return "ok"
}

// TestFailureCorpus diagnoses every real failure log and holds the
// issue's bounds: the right family on ≥ 90 % of logs, every KV correction
// within the capacity the log states, every rendering inside the closed
// character set. With NARWHAL_WRITE_TABLES=1 it rewrites the table in
// docs/diagnose.md (make corpus-tables).
func TestFailureCorpus(t *testing.T) {
	res := loadFailureCorpus(t)
	right := 0
	for _, x := range res {
		checkRendered(t, x.r)
		if x.d.Family == x.c.Family || (x.c.Family == FamilyUnrecognized && x.d.Status != StatusRecognized) {
			right++
		} else {
			t.Logf("miss %s: want %s, got %s (%s); %s", x.name, x.c.Family, x.d.Family, x.d.Wording, x.c.Source)
		}
		if x.kvFit != "" && x.kvFit != "ok" {
			t.Errorf("%s: %s", x.name, x.kvFit)
		}
	}
	if os.Getenv("NARWHAL_WRITE_TABLES") == "1" {
		testkit.WriteDocSection(t, "../../docs/diagnose.md", "corpus-failures", failureTable(res))
	}
	if len(res) < minFailureLogs {
		t.Errorf("the real-log corpus has %d logs, the issue asks for at least %d", len(res), minFailureLogs)
	}
	if rate := float64(right) / float64(max(len(res), 1)); rate < minFamilyRightRate {
		t.Errorf("right family on %d of %d real logs (%.1f %%), want ≥ %.0f %%", right, len(res), 100*rate, 100*minFamilyRightRate)
	}
}

// failureTable is the per-family table of the corpus results.
func failureTable(res []failureResult) string {
	type row struct{ logs, right, kvChecked, kvOK int }
	rows := map[Family]*row{}
	var misses []string
	total := row{}
	for _, x := range res {
		r := rows[x.c.Family]
		if r == nil {
			r = &row{}
			rows[x.c.Family] = r
		}
		r.logs++
		total.logs++
		if x.d.Family == x.c.Family || (x.c.Family == FamilyUnrecognized && x.d.Status != StatusRecognized) {
			r.right++
			total.right++
		} else {
			misses = append(misses, fmt.Sprintf("| `%s` | %s | %s | [source](%s) |", x.name, x.c.Family, x.d.Family, x.c.Source))
		}
		if x.kvFit != "" {
			r.kvChecked++
			total.kvChecked++
			if x.kvFit == "ok" {
				r.kvOK++
				total.kvOK++
			}
		}
	}
	fams := make([]string, 0, len(rows))
	for f := range rows {
		fams = append(fams, string(f))
	}
	sort.Strings(fams)
	var b strings.Builder
	b.WriteString("| family | logs | right family | KV corrections within the logged capacity |\n| --- | ---: | ---: | ---: |\n")
	cell := func(r *row) string {
		if r.kvChecked == 0 {
			return "–"
		}
		return fmt.Sprintf("%d / %d", r.kvOK, r.kvChecked)
	}
	for _, f := range fams {
		r := rows[Family(f)]
		fmt.Fprintf(&b, "| `%s` | %d | %d | %s |\n", f, r.logs, r.right, cell(r))
	}
	fmt.Fprintf(&b, "| **all** | **%d** | **%d (%.1f %%)** | %s |\n", total.logs, total.right, 100*float64(total.right)/float64(max(total.logs, 1)), cell(&total))
	if len(misses) > 0 {
		b.WriteString("\nMisses:\n\n| log | expected | diagnosed | |\n| --- | --- | --- | --- |\n")
		b.WriteString(strings.Join(misses, "\n") + "\n")
	}
	return b.String()
}
