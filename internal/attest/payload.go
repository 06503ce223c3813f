package attest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Source keys the sidecar adds for the live identity it read.
const (
	SourceEngineVersion = "engine.vllm_version"
	SourceProcessStart  = "engine.process_start_time_seconds"
)

// body is the payload without its digest: the exact object the digest is
// computed over (RFC 8785 via internal/canon).
type body struct {
	Schema        string               `json:"schema"`
	SchemaVersion int                  `json:"schema_version"`
	Contract      fleet.EngineContract `json:"contract"`
	Sources       map[string]string    `json:"sources"`
	Engine        vllm.Identity        `json:"engine"`
	Accelerator   *Accelerator         `json:"accelerator"`
}

// Payload is what GET /v1/attestation answers.
type Payload struct {
	Schema        string               `json:"schema"`
	SchemaVersion int                  `json:"schema_version"`
	Contract      fleet.EngineContract `json:"contract"`
	Sources       map[string]string    `json:"sources"`
	Engine        vllm.Identity        `json:"engine"`
	// Accelerator is the engine host's observed accelerator (v2); nil in a
	// v1 payload, which predates the observation.
	Accelerator       *Accelerator `json:"accelerator"`
	AttestationDigest string       `json:"attestation_digest"`
}

// Assemble builds the v2 payload for doc bound to the live identity id read
// from engineBase and the accelerator observed beside it, and digests it:
// attestation_digest is the canon digest ("1220"+sha256 hex) of the
// payload without attestation_digest — accelerator included, so the
// observation is as tamper-evident as the contract — and `narwhal
// evidence digest` of that object reproduces it.
func Assemble(doc *Document, id vllm.Identity, acc Accelerator, engineBase string) (Payload, []byte, error) {
	sources := make(map[string]string, len(doc.Sources)+2)
	for k, v := range doc.Sources {
		sources[k] = v
	}
	sources[SourceEngineVersion] = "GET " + engineBase + "/version"
	sources[SourceProcessStart] = "GET " + engineBase + "/metrics process_start_time_seconds"
	b := body{Schema: Schema, SchemaVersion: PayloadSchemaVersion, Contract: doc.Contract, Sources: sources, Engine: id, Accelerator: &acc}
	_, digest, err := canon.MarshalDigest(b)
	if err != nil {
		return Payload{}, nil, fmt.Errorf("digest the attestation payload: %w", err)
	}
	p := Payload{Schema: b.Schema, SchemaVersion: b.SchemaVersion, Contract: b.Contract, Sources: sources, Engine: id,
		Accelerator: b.Accelerator, AttestationDigest: digest}
	raw, err := canon.Marshal(p)
	if err != nil {
		return Payload{}, nil, fmt.Errorf("encode the attestation payload: %w", err)
	}
	return p, raw, nil
}

// StartTolerance is how far a payload's process start may be from the live
// one: vllm.StartTolerance, the one rule's bound.
const StartTolerance = vllm.StartTolerance

// payloadKeys are the members of each payload version.
var payloadKeys = map[int][]string{
	1: {"schema", "schema_version", "contract", "sources", "engine", "attestation_digest"},
	2: {"schema", "schema_version", "contract", "sources", "engine", "accelerator", "attestation_digest"},
}

// Verify checks a payload as received (raw bytes) against the declared
// contract and the live identity. It returns the decoded payload (when it
// decodes) and every failure, as stable one-line strings; none means the
// engine runs the declared build in the attested process. It reads v1
// payloads (Accelerator nil) and v2 ones; the digest is recomputed over
// exactly what was received either way, so a v1 payload's digest verifies
// as before. The accelerator is only checked for form here: comparing it
// with the fleet's hardware is CompareAccelerator's job.
func Verify(raw []byte, declared *fleet.EngineContract, live vllm.Identity) (*Payload, []string) {
	top, err := object(raw)
	if err != nil {
		return nil, []string{"response is not an object"}
	}
	version, err := checkIdentity(top, 1, PayloadSchemaVersion)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if err := exactKeys(top, payloadKeys[version], nil); err != nil {
		return nil, []string{"response: " + err.Error()}
	}
	var fails []string
	if !digestMatches(top) {
		fails = append(fails, "attestation_digest does not match the response")
	}
	k, problems := ParseContract(top["contract"])
	if len(problems) > 0 {
		return nil, append(fails, problems...)
	}
	sources, problems := parseSources(top["sources"], []string{SourceEngineVersion, SourceProcessStart})
	fails = append(fails, problems...)
	if missing := unsourced(k, sources); len(missing) > 0 {
		fails = append(fails, "sources has no entry for populated contract field(s) "+strings.Join(missing, ", "))
	}
	if declared != nil {
		for _, d := range Diff(k, declared) {
			fails = append(fails, fmt.Sprintf("contract.%s is %s, expected %s", d.Field, d.Observed, d.Expected))
		}
	}
	p := &Payload{Schema: Schema, SchemaVersion: version, Contract: *k, Sources: sources}
	_ = json.Unmarshal(top["attestation_digest"], &p.AttestationDigest)
	if version >= 2 {
		var problems []string
		p.Accelerator, problems = parseAccelerator(top["accelerator"])
		fails = append(fails, problems...)
	}
	fails = append(fails, checkEngine(top["engine"], live, p)...)
	return p, fails
}

// parseAccelerator reads a payload's accelerator object strictly: every
// member present, none unknown, values of their kinds and consistent with
// the status.
func parseAccelerator(raw json.RawMessage) (*Accelerator, []string) {
	m, err := object(raw)
	if err != nil {
		return nil, []string{"accelerator " + err.Error()}
	}
	if err := exactKeys(m, []string{"status", "name", "memory_bytes", "count", "compute_capability", "count_scope", "source", "detail"}, nil); err != nil {
		return nil, []string{"accelerator: " + err.Error()}
	}
	var a Accelerator
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, []string{"accelerator: " + err.Error()}
	}
	var fails []string
	switch {
	case a.Status == AcceleratorUnknown:
		if strings.TrimSpace(a.Detail) == "" {
			fails = append(fails, "accelerator.detail must say why the accelerator is unknown")
		}
	case a.Status != AcceleratorObserved:
		fails = append(fails, fmt.Sprintf("accelerator.status is %q, expected observed or unknown", a.Status))
	case strings.TrimSpace(a.Name) == "" || a.Count < 1 || a.MemoryBytes < 0:
		fails = append(fails, "accelerator: an observed accelerator needs a name, count ≥ 1 and memory_bytes ≥ 0")
	case a.Scope != ScopeHost && a.Scope != ScopeEngine:
		fails = append(fails, fmt.Sprintf("accelerator.count_scope is %q, expected host or engine", a.Scope))
	}
	if len(fails) > 0 {
		return nil, fails
	}
	return &a, nil
}

// digestMatches recomputes the digest over exactly what was received,
// minus attestation_digest.
func digestMatches(top map[string]json.RawMessage) bool {
	var got string
	if json.Unmarshal(top["attestation_digest"], &got) != nil {
		return false
	}
	rest := make(map[string]json.RawMessage, len(top))
	for k, v := range top {
		if k != "attestation_digest" {
			rest[k] = v
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return false
	}
	c, err := canon.Canonicalize(b)
	return err == nil && canon.Digest(c) == got
}

func checkEngine(raw json.RawMessage, live vllm.Identity, p *Payload) []string {
	var e map[string]any
	if json.Unmarshal(raw, &e) != nil || e == nil {
		return []string{"engine identity is not an object"}
	}
	var fails []string
	v, _ := e["vllm_version"].(string)
	if !vllm.SameBuild(v, live.Version) {
		fails = append(fails, fmt.Sprintf("engine vLLM version is %q, live /version returned %q", v, live.Version))
	}
	t, ok := e["process_start_time_seconds"].(float64)
	switch {
	case !ok:
		fails = append(fails, "engine process_start_time_seconds is not a number")
	case !vllm.SameStart(t, live.ProcessStart):
		fails = append(fails, fmt.Sprintf("engine process started at %.6f, live /metrics reports %.6f", t, live.ProcessStart))
	}
	p.Engine = vllm.Identity{Version: v, ProcessStart: t}
	return fails
}

// Fetch reads a sidecar's attestation response: 200 and at most 1 MiB, or
// an error naming the URL and what it answered. Sidecars never get the
// engine credential, so hc must not add one.
func Fetch(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}
