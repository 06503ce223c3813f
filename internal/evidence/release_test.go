package evidence

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestManifestLicence(t *testing.T) {
	d := "1220" + strings.Repeat("ab", 32)
	rel, err := NewRelease("r", []string{d})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := rel.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["license"] != "CDLA-Permissive-2.0" || m["documentation_license"] != "CC-BY-4.0" || m["schema_version"] != float64(2) {
		t.Fatalf("manifest %s does not state both licences", b)
	}
	cases := []struct {
		name string
		mod  func(*Release)
		ok   bool
	}{
		{"records under another licence", func(r *Release) { r.License = "CC0-1.0" }, false},
		{"v2 without the documentation licence", func(r *Release) { r.DocumentationLicense = "" }, false},
		{"v1 manifest, records licence only", func(r *Release) { r.SchemaVersion, r.DocumentationLicense = 1, "" }, true},
	}
	for _, c := range cases {
		r := rel
		c.mod(&r)
		if err := r.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: err %v", c.name, err)
		}
	}
}

// TestDocsLicenceNotice: the documentation carries its CC-BY-4.0 notice.
func TestDocsLicenceNotice(t *testing.T) {
	b, err := os.ReadFile("../../docs/LICENSE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CC-BY-4.0", "https://creativecommons.org/licenses/by/4.0/", "CDLA-Permissive-2.0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("docs/LICENSE.md lacks %q", want)
		}
	}
}
