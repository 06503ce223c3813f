// Package attest is the engine attestation of narwhal.attestation: the
// document an operator writes beside each engine (contract + sources, v1),
// the payload the sidecar serves (contract, sources, live engine identity,
// since v2 the observed accelerator, and an RFC 8785 digest over all of
// it), its verification, and the sidecar HTTP server that stops vouching
// (503) once the engine process changes.
package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Schema and SchemaVersion identify the attestation document (written by
// the operator; still v1). PayloadSchemaVersion is the payload the sidecar
// serves: v2 adds "accelerator". Verify still reads v1 payloads (no
// accelerator: the observation is unknown), so a new narwhal-check works
// against old sidecars; an old narwhal-check refuses a v2 payload as newer
// than it reads, naming the upgrade.
const (
	Schema               = "narwhal.attestation"
	SchemaVersion        = 1
	PayloadSchemaVersion = 2
)

// ContractFields are the 18 engine_contract fields in the schema's table
// order; messages list fields in this order.
var ContractFields = []string{"vllm_version", "image_digest", "nixl_version",
	"nixl_connector_version", "model_architecture", "model_dtype", "kv_heads", "head_size",
	"hidden_layers", "attention_backend", "kv_cache_dtype", "cross_layers_blocks",
	"hybrid_kv_cache_manager", "connector", "kv_role", "transfer_mode", "speculative_config",
	"enforce_handshake_compat"}

// Document is a loaded, validated attestation document.
type Document struct {
	Contract fleet.EngineContract
	Sources  map[string]string
}

// Load reads and validates the document at path.
func Load(path string) (*Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("attestation document %s: %w", path, unwrapPath(err))
	}
	return Parse(path, data)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse validates data as an attestation document; source names it in
// errors. Exactly schema, schema_version, contract and sources are allowed.
func Parse(source string, data []byte) (*Document, error) {
	top, err := object(data)
	if err != nil {
		return nil, fmt.Errorf("attestation document %s: %v", source, err)
	}
	if err := exactKeys(top, []string{"schema", "schema_version", "contract", "sources"}, nil); err != nil {
		return nil, fmt.Errorf("attestation document %s: %v", source, err)
	}
	if _, err := checkIdentity(top, SchemaVersion, SchemaVersion); err != nil {
		return nil, fmt.Errorf("attestation document %s: %v", source, err)
	}
	doc, problems := parseBody(top["contract"], top["sources"])
	if len(problems) > 0 {
		return nil, fmt.Errorf("attestation document %s: %s", source, strings.Join(problems, "; "))
	}
	return doc, nil
}

// parseBody validates the contract (with the fleet loader's own rules, so
// the two never disagree) and the sources rule.
func parseBody(rawContract, rawSources json.RawMessage) (*Document, []string) {
	k, problems := ParseContract(rawContract)
	if len(problems) > 0 {
		return nil, problems
	}
	sources, problems := parseSources(rawSources, nil)
	if len(problems) > 0 {
		return nil, problems
	}
	if missing := unsourced(k, sources); len(missing) > 0 {
		return nil, []string{fmt.Sprintf("sources has no entry for populated contract field(s) %s: name the evidence (file and sha256) each value came from",
			strings.Join(missing, ", "))}
	}
	return &Document{Contract: *k, Sources: sources}, nil
}

// checkIdentity requires this schema and a version in [oldest, newest]
// and returns it; a newer version is reported as newer than this build.
func checkIdentity(top map[string]json.RawMessage, oldest, newest int) (int, error) {
	var s string
	if json.Unmarshal(top["schema"], &s) != nil || s != Schema {
		return 0, fmt.Errorf("schema is %s, expected %q", orNull(top["schema"]), Schema)
	}
	var v json.Number
	dec := json.NewDecoder(bytes.NewReader(top["schema_version"]))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return 0, fmt.Errorf("schema_version is %s, expected %d", orNull(top["schema_version"]), newest)
	}
	switch n, err := v.Int64(); {
	case err != nil:
		return 0, fmt.Errorf("schema_version is %s, expected %d", v, newest)
	case n > int64(newest):
		return 0, fmt.Errorf("schema_version %d is newer than this narwhal reads (%d); upgrade narwhal", n, newest)
	case n < int64(oldest):
		return 0, fmt.Errorf("schema_version %d is not readable by this narwhal (it reads %d); regenerate the document", n, newest)
	default:
		return int(n), nil
	}
}

func orNull(b json.RawMessage) string {
	if len(b) == 0 {
		return "absent"
	}
	return string(b)
}

// object decodes a JSON object into its raw members.
func object(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("is not a JSON object")
	}
	if dec.More() {
		return nil, fmt.Errorf("has content after the JSON object")
	}
	return m, nil
}

// exactKeys reports unknown keys, then missing required ones.
func exactKeys(m map[string]json.RawMessage, required, optional []string) error {
	known := map[string]bool{}
	for _, k := range append(append([]string{}, required...), optional...) {
		known[k] = true
	}
	var unknown, missing []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("unknown field(s): %s", strings.Join(unknown, ", "))
	case len(missing) > 0:
		return fmt.Errorf("missing field(s): %s", strings.Join(missing, ", "))
	}
	return nil
}

// parseSources reads the sources object: keys are contract fields (or the
// extra keys allowed), values non-empty strings.
func parseSources(raw json.RawMessage, extra []string) (map[string]string, []string) {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, []string{"sources must be an object mapping contract field names to evidence"}
	}
	allowed := map[string]bool{}
	for _, f := range append(append([]string{}, ContractFields...), extra...) {
		allowed[f] = true
	}
	out := make(map[string]string, len(m))
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		switch {
		case !allowed[k]:
			problems = append(problems, fmt.Sprintf("sources.%s is not a contract field", k))
		case !ok || strings.TrimSpace(s) == "":
			problems = append(problems, fmt.Sprintf("sources.%s must be a non-empty string naming the evidence", k))
		default:
			out[k] = s
		}
	}
	return out, problems
}

// Populated lists the contract fields that carry a value — any boolean,
// or a value that is non-null, non-empty and non-zero — in table order.
// Each of them needs a source.
func Populated(k *fleet.EngineContract) []string {
	vals := ContractValues(k)
	var out []string
	for _, f := range ContractFields {
		switch v := vals[f].(type) {
		case bool:
			out = append(out, f)
		case string:
			if v != "" {
				out = append(out, f)
			}
		case int:
			if v != 0 {
				out = append(out, f)
			}
		case *bool:
			if v != nil {
				out = append(out, f)
			}
		}
	}
	return out
}

func unsourced(k *fleet.EngineContract, sources map[string]string) []string {
	var out []string
	for _, f := range Populated(k) {
		if strings.TrimSpace(sources[f]) == "" {
			out = append(out, f)
		}
	}
	return out
}

// ContractValues maps each field name to its Go value (string, int, bool
// or *bool).
func ContractValues(k *fleet.EngineContract) map[string]any {
	return map[string]any{
		"vllm_version": k.VLLMVersion, "image_digest": k.ImageDigest, "nixl_version": k.NIXLVersion,
		"nixl_connector_version": k.NIXLConnectorVersion, "model_architecture": k.ModelArchitecture,
		"model_dtype": k.ModelDtype, "kv_heads": k.KVHeads, "head_size": k.HeadSize,
		"hidden_layers": k.HiddenLayers, "attention_backend": k.AttentionBackend,
		"kv_cache_dtype": k.KVCacheDtype, "cross_layers_blocks": k.CrossLayersBlocks,
		"hybrid_kv_cache_manager": k.HybridKVCacheManager, "connector": k.Connector,
		"kv_role": k.KVRole, "transfer_mode": k.TransferMode, "speculative_config": k.SpeculativeConfig,
		"enforce_handshake_compat": k.EnforceHandshakeCompat,
	}
}
