package simengine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Contract is the complete engine_contract a simulated engine with id
// attests. Fields vLLM's compatibility hash covers come from id; the rest
// are the fixed facts of the simulated build (an image digest derived from
// the version, NIXL 0.6.1, kv_both, pull, no speculation).
func Contract(id CompatFactors) fleet.EngineContract {
	sum := sha256.Sum256([]byte("narwhal-simengine vllm " + id.VLLMVersion))
	crossLayers, hma := id.CrossLayersBlocks, id.HMAEnabled
	return fleet.EngineContract{
		VLLMVersion: id.VLLMVersion, ImageDigest: "sha256:" + hex.EncodeToString(sum[:]), NIXLVersion: "0.6.1",
		NIXLConnectorVersion: id.ConnectorVersion, ModelArchitecture: "SimEngineForCausalLM",
		ModelDtype: strings.TrimPrefix(id.DType, "torch."), KVHeads: id.NumKVHeads, HeadSize: id.HeadSize,
		HiddenLayers: id.NumHiddenLayers, AttentionBackend: id.AttnBackend, KVCacheDtype: id.CacheDType,
		CrossLayersBlocks: &crossLayers, HybridKVCacheManager: &hma, Connector: "NixlConnector",
		KVRole: "kv_both", TransferMode: "pull", SpeculativeConfig: "disabled", EnforceHandshakeCompat: true,
	}
}

// AttestationDocument is the narwhal.attestation v1 document of this
// engine (JSON): its Contract, every field sourced from the simulated
// engine's configuration. narwhal-attest (internal/attest) serves it; this
// package does not import attest, so the vllm tests can keep importing
// simengine.
func (e *Engine) AttestationDocument() []byte {
	k := Contract(e.Compat())
	var fields map[string]any
	b, _ := json.Marshal(k)
	_ = json.Unmarshal(b, &fields)
	src := make(map[string]string, len(fields))
	for f := range fields {
		src[f] = "simengine Config.Compat (narwhal-engine sim, model " + e.cfg.Model + ")"
	}
	out, _ := json.Marshal(map[string]any{"schema": "narwhal.attestation", "schema_version": 1, "contract": k, "sources": src})
	return out
}
