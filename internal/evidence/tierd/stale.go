package tierd

import (
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/vllmrel"
)

// Expired is one record that is not fresh, and why.
type Expired struct {
	Record string                  `json:"record"`
	Kind   evidence.Kind           `json:"kind"`
	Clock  evidence.FreshnessClock `json:"freshness_clock"`
	State  evidence.State          `json:"state"`
	Reason string                  `json:"reason"`
	Engine string                  `json:"engine"`
}

// Stale lists every record that is stale or of unknown freshness as of
// asOf: engine-minor evidence is judged against the engine the endpoint's
// current boot record names.
func Stale(records []store.Stored, engines []string, asOf time.Time, ix vllmrel.Index, advisories []evidence.Advisory) []Expired {
	deployed := map[string]*evidence.Version{}
	engineOf := map[string]string{}
	for _, iid := range engines {
		for _, b := range boots(records, iid) {
			engineOf[b.Record.Subject[evidence.SubjectEndpoint]] = iid
		}
		if cur, ok := Current(records, iid); ok {
			if v, err := evidence.ParseVersion(cur.Record.Engine.Version); err == nil {
				deployed[iid] = &v
			}
		}
	}
	out := []Expired{}
	for _, s := range records {
		iid := engineOf[s.Record.Subject[evidence.SubjectEndpoint]]
		in := evidence.FreshnessInput{Now: asOf, Releases: ix.AsOf(asOf), Advisories: advisories, DeployedEngine: deployed[iid]}
		f := evidence.Evaluate(s.Record, in)
		if f.State != evidence.Fresh {
			out = append(out, Expired{Record: s.Digest, Kind: s.Record.Kind, Clock: evidence.ClockFor(s.Record.Kind), State: f.State, Reason: f.Reason, Engine: iid})
		}
	}
	return out
}
