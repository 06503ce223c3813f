package tierd

import (
	"fmt"
	"slices"
	"sort"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
)

// endpoint derives one engine's decision.
func endpoint(in Input, res map[string]evidence.Resolution, plan *evidence.Record, app, iid string) (Endpoint, error) {
	ep := Endpoint{Engine: iid, Basis: []string{}, Missing: []evidence.Requirement{}, MissingText: []string{}, Contested: []Contest{},
		Stale: []string{}, States: []State{}, Previous: []string{}, Notes: []string{}, Application: app}
	bs := boots(in.Records, iid)
	if len(bs) > 0 {
		cur := bs[len(bs)-1]
		ep.Endpoint, ep.EngineVersion = cur.Record.Subject[evidence.SubjectEndpoint], cur.Record.Engine.Version
		ep.Artifact, ep.HardwareClass = cur.Record.Subject[evidence.SubjectArtifact], cur.Record.Subject[evidence.SubjectHardwareClass]
		ep.Previous, ep.Notes = previous(bs)
	}
	if plan != nil {
		ep.Artifact, ep.HardwareClass = plan.Subject[evidence.SubjectArtifact], plan.Subject[evidence.SubjectHardwareClass]
	}
	if app != "" {
		if why := policyViolation(in, app, ep.Artifact); why != "" {
			ep.Notes, ep.Application = append(ep.Notes, why), ""
		}
	}
	records, notes := admissible(in.Records, ep)
	ep.Notes = append(ep.Notes, notes...)
	q := query(in, ep, records)
	ep.MarginBytes = q.MarginBytes
	d, err := evidence.Derive(records, q)
	if err != nil {
		return ep, err
	}
	ep.Tier, ep.Basis, ep.Stale = d.Tier, append(ep.Basis, d.Basis...), append(ep.Stale, d.Stale...)
	ep.Missing = append(ep.Missing, d.Missing...)
	if len(d.Contested) > 0 && !slices.Contains(ep.Missing, evidence.NeedUncontested) {
		ep.Missing = append(ep.Missing, evidence.NeedUncontested) // a contested key blocked a lower tier
	}
	if len(ep.Previous) > 0 && d.Tier != evidence.RecommendedEndpoint && evidenceOnPrevious(in.Records, ep.Previous) {
		ep.Missing = append(ep.Missing, evidence.NeedSameFingerprint)
	}
	ep.MissingText = texts(ep.Missing)
	for _, k := range d.Contested {
		ep.Contested = append(ep.Contested, Contest{Key: k, Records: res[k].Shown, Notes: res[k].Notes})
	}
	ep.States = states(records, q)
	return ep, nil
}

// previous lists the fingerprints the engine ran before its current one,
// and a note when the latest boot changed it.
func previous(bs []store.Stored) ([]string, []string) {
	cur := bs[len(bs)-1]
	fp := cur.Record.Subject[evidence.SubjectEndpoint]
	var prev, notes []string
	for i := len(bs) - 2; i >= 0; i-- {
		p := bs[i].Record.Subject[evidence.SubjectEndpoint]
		if p == fp || slices.Contains(prev, p) {
			continue
		}
		if len(prev) == 0 {
			notes = append(notes, joinVersions(bs[i], cur))
		}
		prev = append(prev, p)
	}
	return append([]string{}, prev...), append([]string{}, notes...)
}

// evidenceOnPrevious: an old fingerprint carried serving or task evidence
// that the current one lacks.
func evidenceOnPrevious(records []store.Stored, prev []string) bool {
	for _, s := range records {
		k := s.Record.Kind
		if (k == evidence.KindWorkload || k == evidence.KindTask) && slices.Contains(prev, s.Record.Subject[evidence.SubjectEndpoint]) {
			return true
		}
	}
	return false
}

// policyViolation checks the accepted request's artifact policy: never an
// unresolved or unbound identity, and the named one when it names one.
func policyViolation(in Input, app, artifact string) string {
	req, err := decision.LoadRequest(in.Store, app)
	if err != nil {
		return err.Error()
	}
	switch {
	case hasPrefix(artifact, "unresolved:", "unbound:") || artifact == "":
		return fmt.Sprintf("decision request %s needs a resolved artifact identity; this endpoint's is %q (bind a plan with narwhal-check --plan)", shortFP(app), artifact)
	case req.ArtifactPolicy.Artifact != "" && req.ArtifactPolicy.Artifact != artifact:
		return fmt.Sprintf("decision request %s's artifact policy names %s; this endpoint serves %s", shortFP(app), shortFP(req.ArtifactPolicy.Artifact), shortFP(artifact))
	}
	return ""
}

// query builds the tier query: freshness as of in.AsOf against the
// release index, the deployed engine the current boot attests, and the
// plan's stated margin.
func query(in Input, ep Endpoint, records []evidence.Record) evidence.TierQuery {
	f := evidence.FreshnessInput{Now: in.AsOf, Releases: in.Releases.AsOf(in.AsOf), Advisories: in.Advisories}
	if v, err := evidence.ParseVersion(ep.EngineVersion); err == nil {
		f.DeployedEngine = &v
	}
	q := evidence.TierQuery{Artifact: ep.Artifact, HardwareClass: ep.HardwareClass, Endpoint: ep.Endpoint, Application: ep.Application, Freshness: f}
	for _, r := range records {
		if r.Kind == evidence.KindPrediction && r.Subject[evidence.SubjectArtifact] == ep.Artifact && r.Subject[evidence.SubjectHardwareClass] == ep.HardwareClass {
			if m, ok := r.Display["stated_margin_bytes"].(float64); ok && m > q.MarginBytes {
				q.MarginBytes = m
			}
		}
	}
	return q
}

// states lists the endpoint evidence states the current fingerprint holds.
func states(records []evidence.Record, q evidence.TierQuery) []State {
	got := map[string][]string{}
	for _, r := range records {
		if r.Subject[evidence.SubjectEndpoint] != q.Endpoint || q.Endpoint == "" || r.Claim.Verdict == nil {
			continue
		}
		d, _ := r.Digest()
		switch {
		case r.Kind == evidence.KindEndpointState && *r.Claim.Verdict == evidence.VerdictPass:
			got[r.Claim.Quantity[len("endpoint_state:"):]] = append(got[r.Claim.Quantity[len("endpoint_state:"):]], d)
		case r.Kind == evidence.KindWorkload && *r.Claim.Verdict == evidence.VerdictMeetsSLO && r.Subject[evidence.SubjectApplication] == q.Application &&
			evidence.Evaluate(r, q.Freshness).State == evidence.Fresh:
			got["serving_verified"] = append(got["serving_verified"], d)
		}
	}
	out := []State{}
	for _, name := range []string{"artifact_resolved", "format_detected", "engine_config_validated", "boot_verified", "serving_verified"} {
		if ds := got[name]; len(ds) > 0 {
			sort.Strings(ds)
			out = append(out, State{State: name, Records: ds})
		}
	}
	return out
}
