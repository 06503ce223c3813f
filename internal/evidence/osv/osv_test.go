package osv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// A record shaped as the schema's "affected fields" section describes
// (the id is made up; the shape is the schema's).
const record = `{"schema_version":"1.6.0","id":"GHSA-test-0001","modified":"2026-11-30T00:00:00Z",
"affected":[{"package":{"ecosystem":"PyPI","name":"vLLM"},
 "ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0.20.0"},{"fixed":"0.21.1"}]},{"type":"GIT","repo":"x","events":[{"introduced":"abc"}]}],
 "versions":["0.20.0","0.21.0"]},
 {"package":{"ecosystem":"PyPI","name":"torch"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"last_affected":"2.4.0"}]}]}]}`

func TestParseShapes(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"one record", record, "GHSA-test-0001 [vllm@0.20.0 vllm@0.21.0] 2 ranges", ""},
		{"an array", "[" + record + "]", "GHSA-test-0001 [vllm@0.20.0 vllm@0.21.0] 2 ranges", ""},
		{"osv.dev's vulns", `{"vulns":[` + record + `]}`, "GHSA-test-0001 [vllm@0.20.0 vllm@0.21.0] 2 ranges", ""},
		{"withdrawn", strings.Replace(record, `"modified"`, `"withdrawn":"2026-12-01T00:00:00Z","modified"`, 1), "", ""},
		{"no id", `{"modified":"2026-01-01T00:00:00Z"}`, "", "id and modified are required"},
		{"not JSON", `{`, "", "OSV record"},
	}
	for _, c := range cases {
		advs, err := Parse([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		got := ""
		for _, a := range advs {
			got = fmt.Sprintf("%s %v %d ranges", a.ID, a.Affects, len(a.Ranges))
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q (err %v), want %q", c.name, got, err, c.want)
		}
	}
}

// Security evidence is stale when an imported advisory's versions or
// ranges cover its engine or a package, fresh when none does, and unknown
// when no advisory index was ever imported.
func TestAdvisoriesDecideSecurityFreshness(t *testing.T) {
	advs, err := Parse([]byte(record))
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := evidence.ParseVersion("0.21.0")
	sec := func(engine string, pkgs ...string) evidence.Record {
		return evidence.Record{Kind: evidence.KindSecurity, Engine: evidence.Engine{Name: "vllm", Version: engine, Packages: pkgs},
			ObservedAt: "2026-12-01T00:00:00Z"}
	}
	cases := []struct {
		name string
		r    evidence.Record
		advs []evidence.Advisory
		want evidence.State
	}{
		{"no index imported", sec("0.21.0"), nil, evidence.Unknown},
		{"a listed version", sec("0.21.0"), advs, evidence.Stale},
		{"inside the ECOSYSTEM range, not listed", sec("0.20.5"), advs, evidence.Stale},
		{"the fixed version", sec("0.21.1"), advs, evidence.Fresh},
		{"a package up to last_affected", sec("0.21.1", "torch@2.4.0"), advs, evidence.Stale},
		{"a package past last_affected", sec("0.21.1", "torch@2.5.0"), advs, evidence.Fresh},
	}
	for _, c := range cases {
		in := evidence.FreshnessInput{Now: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Releases: []evidence.Version{rel}, Advisories: c.advs}
		if got := evidence.Evaluate(c.r, in); got.State != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got.State, got.Reason, c.want)
		}
	}
}
