package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Where each contract field's evidence comes from in a launch directory:
// the plan itself, the runtime inspection of the running engine, or its
// startup log.
var (
	fromPlan    = []string{"connector", "kv_role", "enforce_handshake_compat", "model_dtype", "kv_cache_dtype", "speculative_config"}
	fromLog     = []string{"attention_backend", "cross_layers_blocks", "hybrid_kv_cache_manager", "transfer_mode"}
	fromInspect = []string{"vllm_version", "image_digest", "nixl_version", "nixl_connector_version", "model_architecture",
		"kv_heads", "head_size", "hidden_layers"}
)

// Write renders the plans into dir, which must not exist (a launch
// directory is never overwritten): per engine <dir>/<iid>/launch.json,
// launch.sh and an engine-attestation.json skeleton whose sources point at
// the plan, the runtime inspection and the startup log.
func Write(dir string, cfg *fleet.Config, plans []Engine) ([]string, error) {
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("%s exists; a launch directory is never overwritten: choose a fresh --out", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, p := range plans {
		files, err := writeEngine(filepath.Join(abs, p.IID), cfg, p)
		if err != nil {
			return written, fmt.Errorf("engine %s: %w", p.IID, err)
		}
		written = append(written, files...)
	}
	return written, nil
}

func writeEngine(dir string, cfg *fleet.Config, p Engine) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	plan, err := json.MarshalIndent(map[string]any{"schema": Schema, "schema_version": SchemaVersion, "engine": p}, "", "  ")
	if err != nil {
		return nil, err
	}
	planPath, scriptPath, docPath := filepath.Join(dir, "launch.json"), filepath.Join(dir, "launch.sh"), filepath.Join(dir, "engine-attestation.json")
	sum := sha256.Sum256(plan)
	doc, err := json.MarshalIndent(skeleton(cfg, dir, planPath+" sha256:"+hex.EncodeToString(sum[:])), "", "  ")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{planPath, append(plan, '\n'), 0o644}, {scriptPath, []byte(p.Script()), 0o755}, {docPath, append(doc, '\n'), 0o644}} {
		if err := atomicfile.Write(f.path, f.data, f.mode); err != nil {
			return nil, err
		}
	}
	return []string{planPath, scriptPath, docPath}, nil
}

// skeleton is the attestation document to complete after launch: the
// fleet's contract (or the plan's own values) and a source for every
// field naming where its evidence is captured.
func skeleton(cfg *fleet.Config, dir, planSource string) map[string]any {
	k := fleet.DefaultContract()
	if cfg.EngineContract != nil {
		k = *cfg.EngineContract
	}
	k.KVRole = kvTransferConfig(cfg.EngineContract)["kv_role"].(string)
	sources := map[string]string{}
	for _, f := range fromPlan {
		sources[f] = planSource
	}
	for _, f := range fromInspect {
		sources[f] = filepath.Join(dir, "checked.json") + " (runtime inspection of the running engine)"
	}
	for _, f := range fromLog {
		sources[f] = filepath.Join(dir, "startup.log") + " (vLLM startup log)"
	}
	return map[string]any{"schema": "narwhal.attestation", "schema_version": 1, "contract": k, "sources": sources}
}
