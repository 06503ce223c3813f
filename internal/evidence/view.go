package evidence

// evidenceView indexes records for tier derivation: each record with its
// digest, and the conflict resolution of its key.
type evidenceView struct {
	q         TierQuery
	entries   []entry
	byDigest  map[string]int
	winnerOf  map[string]string // conflict key -> winner digest ("" if contested)
	keyOf     map[string]string // record digest -> conflict key
	contested map[string]bool   // contested keys that touched a basis
}

func newEvidenceView(records []Record, q TierQuery) (*evidenceView, error) {
	res, err := Resolve(records)
	if err != nil {
		return nil, err
	}
	ev := &evidenceView{q: q, byDigest: map[string]int{}, winnerOf: map[string]string{}, keyOf: map[string]string{}, contested: map[string]bool{}}
	for _, r := range records {
		d, err := r.Digest()
		if err != nil {
			return nil, err
		}
		ev.byDigest[d] = len(ev.entries)
		ev.entries = append(ev.entries, entry{r: r, digest: d})
	}
	for _, rs := range res {
		ev.winnerOf[rs.Key] = rs.Winner
		for _, d := range rs.Shown {
			ev.keyOf[d] = rs.Key
		}
	}
	return ev, nil
}

// effective finds a record of kind k about the query's subject (the listed
// subject keys must match) whose key's resolution supports verdict. A key
// that is contested never supports anything: it is recorded in the
// decision, and nothing is auto-resolved.
func (ev *evidenceView) effective(k Kind, verdict string, d *Decision, keys ...string) (entry, bool) {
	for _, e := range ev.sorted() {
		if e.r.Kind != k || !ev.subjectMatches(e.r, keys) {
			continue
		}
		key := ev.keyOf[e.digest]
		w := ev.winnerOf[key]
		if w == "" {
			ev.contested[key] = true
			d.Contested = append(d.Contested, key)
			continue
		}
		win := ev.entries[ev.byDigest[w]]
		if win.r.Claim.Verdict != nil && *win.r.Claim.Verdict == verdict {
			return win, true
		}
	}
	return entry{}, false
}

func (ev *evidenceView) subjectMatches(r Record, keys []string) bool {
	want := map[string]string{
		SubjectArtifact: ev.q.Artifact, SubjectHardwareClass: ev.q.HardwareClass,
		SubjectEndpoint: ev.q.Endpoint, SubjectApplication: ev.q.Application, SubjectSolution: ev.q.Solution,
	}
	for _, k := range keys {
		if want[k] == "" || r.Subject[k] != want[k] {
			return false
		}
	}
	return true
}

// sorted returns entries in a fixed order (level, engine, digest) so the
// decision never depends on input order.
func (ev *evidenceView) sorted() []entry {
	es := append([]entry(nil), ev.entries...)
	for i := range es {
		if v, err := ParseVersion(es[i].r.Engine.Version); err == nil {
			es[i].version = &v
		}
	}
	sortEntries(es)
	return es
}

func (ev *evidenceView) fresh(e entry) bool {
	return Evaluate(e.r, ev.q.Freshness).State == Fresh
}

// atDeployed: the record was observed at the engine currently attested.
func (ev *evidenceView) atDeployed(e entry) bool {
	dep := ev.q.Freshness.DeployedEngine
	v, err := ParseVersion(e.r.Engine.Version)
	return dep != nil && err == nil && v.Compare(*dep) == 0
}

// everyServingMet: each required serving quantity has a fresh winning
// record that meets the SLO, and no serving key for the endpoint is
// contested or failing.
func (ev *evidenceView) everyServingMet(d *Decision) bool {
	met := map[string]bool{}
	for _, e := range ev.entries {
		if e.r.Kind != KindWorkload || !ev.subjectMatches(e.r, []string{SubjectEndpoint, SubjectApplication}) {
			continue
		}
		w := ev.winnerOf[ev.keyOf[e.digest]]
		if w == "" {
			return false
		}
		win := ev.entries[ev.byDigest[w]]
		if win.r.Claim.Verdict == nil || *win.r.Claim.Verdict != VerdictMeetsSLO || !ev.fresh(win) {
			return false
		}
		met[win.r.Claim.Quantity] = true
		d.Basis = append(d.Basis, win.digest)
	}
	for _, q := range ev.q.ServingConstraints {
		if !met[q] {
			return false
		}
	}
	return true
}
