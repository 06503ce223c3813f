package metrics

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var documentedName = regexp.MustCompile("`(narwhal_[a-z0-9_]+)`")

// TestDocsListEveryFamily keeps docs/observability.md and the registry in
// step: every narwhal_* family the router exports has a row in the doc's
// metric tables, and every name those tables give is exported.
func TestDocsListEveryFamily(t *testing.T) {
	b, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "\n## Metrics"), strings.Index(doc, "\n## Alert rules")
	if start < 0 || end < start {
		t.Fatal(`docs/observability.md has no "## Metrics" section before "## Alert rules"`)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(doc[start:end], "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cell := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0] // names live in the first column
		for _, m := range documentedName.FindAllStringSubmatch(cell, -1) {
			documented[m[1]] = true
		}
	}
	exported := map[string]bool{}
	for name := range scrape(t, New(testConfig())) {
		if strings.HasPrefix(name, "narwhal_") {
			exported[name] = true
		}
	}
	var missing, stale []string
	for name := range exported {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	for name := range documented {
		if !exported[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("exported but not documented in docs/observability.md (add a table row): %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("documented in docs/observability.md but not exported (rename or remove the row): %v", stale)
	}
}
