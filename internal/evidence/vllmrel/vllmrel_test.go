package vllmrel

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestShippedIndexParses(t *testing.T) {
	ix := Shipped()
	if len(ix.Releases) == 0 {
		t.Fatal("the shipped index is empty")
	}
}

func TestAsOfHidesLaterReleases(t *testing.T) {
	ix, err := Parse([]byte(`{"schema":"narwhal.vllm-releases","schema_version":1,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01"},{"version":"0.21.0","date":"2026-02-01"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.AsOf(time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC)); len(got) != 1 || got[0].String() != "0.21.0" {
		t.Fatalf("as of mid-February: %v, want only 0.21.0", got)
	}
	if got := ix.AsOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)); len(got) != 2 {
		t.Fatalf("as of the release day: %v, want both", got)
	}
}

func TestReleaseIndexVersions(t *testing.T) {
	const head = `{"schema":"narwhal.vllm-releases","schema_version":`
	cases := []struct {
		name, doc string
		ok        bool
	}{
		{"v1 dated", head + `1,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01"}]}`, true},
		{"v1 bad date", head + `1,"source":"t","releases":[{"version":"0.22.0","date":"March"}]}`, false},
		{"v1 undated", head + `1,"source":"t","releases":[{"version":"0.22.0","date":""}]}`, false},
		{"v1 with basis", head + `1,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01","date_basis":"tag"}]}`, false},
		{"v2 dated", head + `2,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01","date_basis":"tag v0.22.0"}]}`, true},
		{"v2 undated", head + `2,"source":"t","releases":[{"version":"0.22.0","date":"","date_basis":"unknown: no tag read"}]}`, true},
		{"v2 no basis", head + `2,"source":"t","releases":[{"version":"0.22.0","date":"2026-03-01"}]}`, false},
		{"v2 bad date", head + `2,"source":"t","releases":[{"version":"0.22.0","date":"March","date_basis":"x"}]}`, false},
		{"v3", head + `3,"source":"t","releases":[]}`, false},
		{"bad version", head + `2,"source":"t","releases":[{"version":"banana","date":"","date_basis":"x"}]}`, false},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if (err == nil) != c.ok || (err != nil && strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestUndatedReleasesAreNeverPublished(t *testing.T) {
	ix, err := Parse([]byte(`{"schema":"narwhal.vllm-releases","schema_version":2,"source":"t","releases":[{"version":"0.21.0","date":"2026-02-01","date_basis":"tag"},{"version":"0.22.0","date":"","date_basis":"unknown"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.AsOf(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)); len(got) != 1 || got[0].String() != "0.21.0" {
		t.Fatalf("as of 2030: %v, want only the dated 0.21.0", got)
	}
	if got := ix.Undated(); len(got) != 1 || got[0].String() != "0.22.0" {
		t.Fatalf("undated: %v, want 0.22.0", got)
	}
}

// TestShippedIndexCoversEveryMinor: 0.6.0 to 0.33.0, each with a basis.
func TestShippedIndexCoversEveryMinor(t *testing.T) {
	ix := Shipped()
	seen := map[string]bool{}
	for _, r := range ix.Releases {
		seen[r.Version] = true
		if r.DateBasis == "" {
			t.Errorf("%s: no date_basis", r.Version)
		}
	}
	for m := 6; m <= 33; m++ {
		if v := fmt.Sprintf("0.%d.0", m); !seen[v] {
			t.Errorf("the shipped index lacks %s", v)
		}
	}
}
