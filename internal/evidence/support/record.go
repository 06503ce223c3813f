package support

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Support records: a compatibility record whose claim is a support state
// on one (architecture, GPU arch, CPU arch) at the record's engine version.
const (
	QuantitySupport   = "engine_support"
	SubjectArch       = "architecture"
	SubjectGPUArch    = "gpu_arch"
	SubjectCPUArch    = "cpu_arch"
	displayPlugin     = "plugin"
	displayReason     = "reason"
	supportProducer   = "narwhal support"
	supportProducerV1 = "1"
)

// Mark is a support observation to record.
type Mark struct {
	Key    Key
	State  State
	Plugin string         // for Plugin
	Reason string         // one line, shown with the state
	Inputs []string       // failure record digests behind recognized_but_failed
	Level  evidence.Level // who observed it
}

// NewRecord builds the support record for m. A recognized_but_failed mark
// needs the failure record it rests on (§2.15.3).
func NewRecord(m Mark, clock ports.Clock) (evidence.Record, error) {
	switch {
	case !m.State.Valid():
		return evidence.Record{}, fmt.Errorf("support state %q: want one of %v", m.State, States)
	case m.Key.Architecture == "" || m.Key.EngineVersion == "" || m.Key.GPUArch == "" || m.Key.CPUArch == "":
		return evidence.Record{}, fmt.Errorf("support record %s: architecture, engine version, GPU arch and CPU arch are all required", m.Key)
	case m.State == RecognizedButFailed && len(m.Inputs) == 0:
		return evidence.Record{}, fmt.Errorf("support record %s: recognized_but_failed needs the failure record digest (--failure)", m.Key)
	case m.State == Plugin && m.Plugin == "":
		return evidence.Record{}, fmt.Errorf("support record %s: the plugin state needs the plugin name@version (--plugin)", m.Key)
	}
	verdict := string(m.State)
	r := evidence.Stamp(evidence.Record{
		Kind: evidence.KindCompatibility, ClaimScope: evidence.ScopeBoot, EpistemicStatus: evidence.Measured, Level: m.Level,
		Subject:    map[string]string{SubjectArch: m.Key.Architecture, SubjectGPUArch: m.Key.GPUArch, SubjectCPUArch: m.Key.CPUArch},
		Claim:      evidence.Claim{Quantity: QuantitySupport, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: m.Key.EngineVersion, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: supportProducer, ProducerVersion: supportProducerV1, Inputs: append([]string{}, m.Inputs...)},
		Display:    map[string]any{displayPlugin: m.Plugin, displayReason: m.Reason},
	}, clock)
	return r, r.Validate()
}

// Observations reads the support records among records (digests[i] is
// records[i]'s digest); other records are ignored.
func Observations(records []evidence.Record, digests []string) []Observation {
	var out []Observation
	for i, r := range records {
		if r.Claim.Quantity != QuantitySupport || r.Claim.Verdict == nil || !State(*r.Claim.Verdict).Valid() {
			continue
		}
		plugin, _ := r.Display[displayPlugin].(string)
		reason, _ := r.Display[displayReason].(string)
		out = append(out, Observation{
			Key: Key{Architecture: r.Subject[SubjectArch], EngineVersion: r.Engine.Version,
				GPUArch: r.Subject[SubjectGPUArch], CPUArch: r.Subject[SubjectCPUArch]},
			State: State(*r.Claim.Verdict), Plugin: plugin, Reason: reason, Record: digests[i],
		})
	}
	return out
}
