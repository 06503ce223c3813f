// Package osv reads security advisories in the OSV format (ossf's Open
// Source Vulnerability schema) into the advisories freshness is judged
// against: security evidence goes stale when an advisory affects a
// package of its dependency set (reference/evidence.md, the
// engine_minor_or_advisory clock).
//
// The fields read, and the rule "a version is considered affected if it
// lies within any one of the ranges or is listed in the versions list",
// are the schema's "affected fields" section:
// https://github.com/ossf/osv-schema/blob/00d709a75e60e114be5b9998ab0c40d915de551b/docs/schema.md
// A GIT range (commit hashes) cannot be judged against a version and is
// skipped; its affected versions are still read from `versions`.
package osv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence"
)

// entry is the part of an OSV record read here.
type entry struct {
	ID       string     `json:"id"`
	Modified string     `json:"modified"`
	Withdraw string     `json:"withdrawn"`
	Affected []affected `json:"affected"`
}

type affected struct {
	Package struct {
		Ecosystem string `json:"ecosystem"`
		Name      string `json:"name"`
	} `json:"package"`
	Ranges []struct {
		Type   string              `json:"type"`
		Events []map[string]string `json:"events"`
	} `json:"ranges"`
	Versions []string `json:"versions"`
}

// Parse reads one OSV record, an array of them, or an object with a
// "vulns" array (osv.dev's query answers). Package names are lower-cased
// (PyPI's normalisation for the names narwhal's records carry). A
// withdrawn record affects nothing.
func Parse(b []byte) ([]evidence.Advisory, error) {
	var entries []entry
	t := bytes.TrimSpace(b)
	switch {
	case len(t) > 0 && t[0] == '[':
		if err := json.Unmarshal(t, &entries); err != nil {
			return nil, fmt.Errorf("OSV array: %w", err)
		}
	default:
		var probe struct {
			Vulns *[]entry `json:"vulns"`
			entry
		}
		if err := json.Unmarshal(t, &probe); err != nil {
			return nil, fmt.Errorf("OSV record: %w", err)
		}
		if probe.Vulns != nil {
			entries = *probe.Vulns
		} else {
			entries = []entry{probe.entry}
		}
	}
	out := make([]evidence.Advisory, 0, len(entries))
	for i, e := range entries {
		if e.ID == "" || e.Modified == "" {
			return nil, fmt.Errorf("OSV record %d: id and modified are required (the schema's required fields)", i)
		}
		if e.Withdraw != "" {
			continue
		}
		out = append(out, advisory(e))
	}
	return out, nil
}

func advisory(e entry) evidence.Advisory {
	a := evidence.Advisory{ID: e.ID, Affects: []string{}}
	for _, af := range e.Affected {
		name := strings.ToLower(af.Package.Name)
		for _, v := range af.Versions {
			a.Affects = append(a.Affects, name+"@"+v)
		}
		for _, r := range af.Ranges {
			if r.Type != "ECOSYSTEM" && r.Type != "SEMVER" {
				continue
			}
			a.Ranges = append(a.Ranges, ranges(name, r.Events)...)
		}
	}
	return a
}

// ranges turns a range's events, in order, into [introduced, fixed) or
// [introduced, last_affected] spans; "0" as introduced means every
// earlier version.
func ranges(name string, events []map[string]string) []evidence.AdvisoryRange {
	var out []evidence.AdvisoryRange
	var cur *evidence.AdvisoryRange
	for _, ev := range events {
		switch {
		case ev["introduced"] != "":
			out = append(out, evidence.AdvisoryRange{Package: name, Introduced: ev["introduced"]})
			cur = &out[len(out)-1]
		case cur != nil && ev["fixed"] != "":
			cur.Fixed, cur = ev["fixed"], nil
		case cur != nil && ev["last_affected"] != "":
			cur.LastAffected, cur = ev["last_affected"], nil
		}
	}
	return out
}
