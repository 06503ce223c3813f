package sweep

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Generation is what the sweep read of the engine's process: identity,
// the verified attestation (with a contract) and the digest a row binds.
type Generation struct {
	Identity    vllm.Identity   `json:"identity"`
	Attestation json.RawMessage `json:"attestation,omitempty"`
	Digest      string          `json:"generation_digest"`
}

// generation reads the identity and, with a contract, fetches and
// verifies the attestation against it (operations.md §5.9), through the
// probes preflight and readmission use.
func (m *meter) generation(ctx context.Context) (Generation, error) {
	id, e := m.probes.Identity(ctx, m.t.IID)
	if e != nil {
		return Generation{}, fmt.Errorf("engine identity (/version, process_start_time_seconds on /metrics): %s", fault.Detail(e))
	}
	g := Generation{Identity: id}
	att := ""
	if m.t.Contract != nil {
		a, err := m.probes.AttestRaw(ctx, m.t.IID, id, m.t.Contract)
		if err != nil {
			return Generation{}, err
		}
		g.Attestation, att = a.Raw, a.Payload.AttestationDigest
	}
	d, err := profile.Generation(id.Version, id.ProcessStart, att)
	if err != nil {
		return Generation{}, err
	}
	g.Digest = d
	return g, nil
}
