package simengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Contract is the complete engine_contract a simulated engine with id
// attests. Fields vLLM's compatibility hash covers come from id; the rest
// are the fixed facts of the simulated build (an image digest derived from
// the version, NIXL 0.6.1, kv_both, pull, no speculation).
func Contract(id Identity) fleet.EngineContract {
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

// AttestationDocument is the narwhal.attestation document of this engine:
// its Contract with every populated field sourced from the simulated
// engine's configuration.
func (e *Engine) AttestationDocument() *attest.Document {
	k := Contract(e.cfg.Identity)
	src := map[string]string{}
	for _, f := range attest.Populated(&k) {
		src[f] = "simengine Config.Identity (narwhal-engine sim, model " + e.cfg.Model + ")"
	}
	return &attest.Document{Contract: k, Sources: src}
}

// SidecarOptions place an attestation sidecar beside a simulated engine.
type SidecarOptions struct {
	Host string // default 127.0.0.1
	Port int    // 0 picks a free port
}

// StartSidecar runs narwhal-attest's server in process for e: the same
// code a real deployment runs, bound to e's current process start. Close
// the returned server before (or after) the engine; after e.Restart() it
// answers 503 until a new sidecar is started.
func StartSidecar(ctx context.Context, e *Engine, o SidecarOptions) (*attest.Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	c := vllm.NewClient(e.URL(), vllm.Options{APIKey: e.cfg.APIKey, ConnectTimeout: 2 * time.Second})
	s, err := attest.New(ctx, attest.Options{Document: e.AttestationDocument(), Engine: c, EngineBase: e.URL(), Logger: e.log})
	if err != nil {
		return nil, err
	}
	return s.Listen(net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
}
