package task

import (
	"sort"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Producer names task records.
const (
	Producer = "narwhal evidence task-run"
	Quantity = "task_pass_rate"
)

// Endpoint is one endpoint the run's traffic was routed to, at the
// fingerprint its boot record names.
type Endpoint struct {
	IID, Fingerprint, EngineVersion, BootRecord string
}

// Records makes one task record per endpoint: pass when the pass rate
// reaches the suite's accepted quality floor.
func Records(s decision.Suite, suiteDigest, requestDigest string, eps []Endpoint, outs []Outcome, clock ports.Clock) []evidence.Record {
	passed, failed := 0, []string{}
	for _, o := range outs {
		if o.Pass {
			passed++
		} else {
			failed = append(failed, o.Case)
		}
	}
	rate := float64(passed) / float64(max(1, len(outs)))
	verdict := evidence.VerdictPass
	if rate < s.QualityFloor {
		verdict = evidence.VerdictFail
	}
	var out []evidence.Record
	for _, ep := range eps {
		inputs := []string{suiteDigest, requestDigest, ep.BootRecord}
		sort.Strings(inputs)
		v, value := verdict, rate
		r := evidence.Record{Kind: evidence.KindTask, ClaimScope: evidence.ScopeTaskOutcome, EpistemicStatus: evidence.Measured,
			Level: evidence.MaintainerLabMeasured,
			Subject: map[string]string{evidence.SubjectEndpoint: ep.Fingerprint, evidence.SubjectApplication: requestDigest,
				evidence.SubjectTaskSuite: suiteDigest},
			Claim:      evidence.Claim{Quantity: Quantity, Verdict: &v, Value: &value, Unit: "fraction"},
			Engine:     evidence.Engine{Name: "vllm", Version: ep.EngineVersion, Packages: []string{}},
			Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: inputs},
			Display: map[string]any{"engine_iid": ep.IID, "suite": s.Name, "suite_kind": s.Kind, "cases": len(outs), "passed": passed,
				"failed_cases": failed, "quality_floor": s.QualityFloor, "executor": "narwhal_component:task-run"}}
		out = append(out, evidence.Stamp(r, clock))
	}
	return out
}
