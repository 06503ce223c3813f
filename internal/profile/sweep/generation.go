package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/attest"
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
// verifies the attestation against it (operations.md §5.9).
func (m *meter) generation(ctx context.Context) (Generation, error) {
	id, e := m.t.Client.Identity(ctx)
	if e != nil {
		return Generation{}, fmt.Errorf("engine identity (/version, process_start_time_seconds on /metrics): %s", fault.Detail(e))
	}
	g := Generation{Identity: id}
	att := ""
	if m.t.Contract != nil {
		if m.t.AttestationURL == "" {
			return Generation{}, fmt.Errorf("engine_contract is set but the engine has no attestation_url (run narwhal-attest beside it)")
		}
		raw, err := attest.Fetch(ctx, m.t.Sidecars, m.t.AttestationURL)
		if err != nil {
			return Generation{}, fmt.Errorf("attestation %s: %v", m.t.AttestationURL, err)
		}
		p, fails := attest.Verify(raw, m.t.Contract, id)
		if len(fails) > 0 {
			return Generation{}, fmt.Errorf("attestation %s: %s", m.t.AttestationURL, strings.Join(fails, "; "))
		}
		g.Attestation, att = raw, p.AttestationDigest
	}
	d, err := profile.Generation(id.Version, id.ProcessStart, att)
	if err != nil {
		return Generation{}, err
	}
	g.Digest = d
	return g, nil
}
