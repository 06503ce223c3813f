package tierd

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// admissible is the evidence a tier may stand on: acceptances that pass
// the acceptance rule, task records of accepted suites, and for serving
// and tasks only the latest window or run (an older passing window never
// hides a newer failing one). What is left out is noted.
func admissible(all []store.Stored, ep Endpoint) ([]evidence.Record, []string) {
	var notes []string
	latest := latestRuns(all)
	failedTask := map[string]string{}
	for _, s := range all {
		r := s.Record
		if r.Kind == evidence.KindTask && latest[s.Digest] && *r.Claim.Verdict != evidence.VerdictPass && r.Subject[evidence.SubjectEndpoint] == ep.Endpoint {
			failedTask[r.Subject[evidence.SubjectApplication]] = fmt.Sprintf("task suite %s's latest run %s missed its quality floor", shortFP(r.Subject[evidence.SubjectTaskSuite]), shortFP(s.Digest))
		}
	}
	var out []evidence.Record
	for _, s := range all {
		r := s.Record
		switch r.Kind {
		case evidence.KindAcceptance:
			if why := decision.ValidAcceptance(all, s); why != "" {
				notes = append(notes, why)
				continue
			}
		case evidence.KindTask:
			if !decision.Accepted(all, r.Subject[evidence.SubjectTaskSuite]) {
				notes = append(notes, fmt.Sprintf("task record %s scores suite %s, which is not accepted: ignored", shortFP(s.Digest), shortFP(r.Subject[evidence.SubjectTaskSuite])))
				continue
			}
			if !latest[s.Digest] || failedTask[r.Subject[evidence.SubjectApplication]] != "" {
				continue
			}
		case evidence.KindWorkload:
			if !latest[s.Digest] {
				continue
			}
		}
		out = append(out, r)
	}
	for _, app := range slices.Sorted(maps.Keys(failedTask)) {
		notes = append(notes, failedTask[app])
	}
	return out, notes
}

// latestRuns marks, per endpoint and application (and suite for tasks),
// the records observed last.
func latestRuns(all []store.Stored) map[string]bool {
	type key struct {
		kind                 evidence.Kind
		endpoint, app, suite string
	}
	newest := map[key]time.Time{}
	keyOf := func(r evidence.Record) key {
		return key{r.Kind, r.Subject[evidence.SubjectEndpoint], r.Subject[evidence.SubjectApplication], r.Subject[evidence.SubjectTaskSuite]}
	}
	for _, s := range all {
		if k := s.Record.Kind; k == evidence.KindWorkload || k == evidence.KindTask {
			if at := observed(s.Record); at.After(newest[keyOf(s.Record)]) {
				newest[keyOf(s.Record)] = at
			}
		}
	}
	out := map[string]bool{}
	for _, s := range all {
		if at, ok := newest[keyOf(s.Record)]; ok && observed(s.Record).Equal(at) {
			out[s.Digest] = true
		}
	}
	return out
}

// observed is a record's observed_at (validated RFC 3339 on every read).
func observed(r evidence.Record) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.ObservedAt)
	return t
}
