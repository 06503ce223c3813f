package simengine

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// CompatFactors are what NIXL's compatibility hash covers (vllm-protocol.md §9.1,
// E2 factor set). Two engines pair only when their hashes are equal.
type CompatFactors struct {
	VLLMVersion       string
	ConnectorVersion  int
	Model             string // the launch string, not the served name
	DType             string // e.g. "torch.bfloat16"
	NumKVHeads        int
	HeadSize          int
	NumHiddenLayers   int
	AttnBackend       string // e.g. "FLASH_ATTN"
	CacheDType        string // e.g. "auto"
	CrossLayersBlocks bool
	HMAEnabled        bool
}

// DefaultCompat is a Llama-3-8B-like engine on vLLM's E2 connector.
func DefaultCompat(model string) CompatFactors {
	return CompatFactors{VLLMVersion: "0.21.0", ConnectorVersion: 4, Model: model, DType: "torch.bfloat16",
		NumKVHeads: 8, HeadSize: 128, NumHiddenLayers: 32, AttnBackend: "FLASH_ATTN", CacheDType: "auto", HMAEnabled: true}
}

// KVBytesPerToken is the KV footprint of one token: K and V, every layer,
// every KV head, at the cache dtype's width.
func (id CompatFactors) KVBytesPerToken() int64 {
	width := int64(2)
	switch {
	case strings.Contains(id.CacheDType, "fp8"):
		width = 1
	case id.CacheDType == "auto" && strings.Contains(id.DType, "float32"):
		width = 4
	}
	return 2 * int64(id.NumHiddenLayers) * int64(id.NumKVHeads) * int64(id.HeadSize) * width
}

// CompatibilityHash reproduces vLLM's hash_factors: SHA-256 hex of
// json.dumps(factors, sort_keys=True) with Python's default separators, so
// a controller can recompute a real engine's hash from the same inputs.
func CompatibilityHash(id CompatFactors) string {
	// Keys in sorted order, as sort_keys=True emits them.
	parts := []string{
		pyPair("attn_backend_name", pyStr(id.AttnBackend)),
		pyPair("cache_dtype", pyStr(id.CacheDType)),
		pyPair("cross_layers_blocks", strconv.FormatBool(id.CrossLayersBlocks)),
		pyPair("dtype", pyStr(id.DType)),
		pyPair("head_size", strconv.Itoa(id.HeadSize)),
		pyPair("is_hma_enabled", strconv.FormatBool(id.HMAEnabled)),
		pyPair("model", pyStr(id.Model)),
		pyPair("nixl_connector_version", strconv.Itoa(id.ConnectorVersion)),
		pyPair("num_hidden_layers", strconv.Itoa(id.NumHiddenLayers)),
		pyPair("num_kv_heads", strconv.Itoa(id.NumKVHeads)),
		pyPair("vllm_version", pyStr(id.VLLMVersion)),
	}
	sum := sha256.Sum256([]byte("{" + strings.Join(parts, ", ") + "}"))
	return hex.EncodeToString(sum[:])
}

func pyPair(k, v string) string { return pyStr(k) + ": " + v }

// pyStr is json.dumps of a string with ensure_ascii=True.
func pyStr(s string) string {
	return pyQuote(s, `"`, func(r rune) string {
		switch {
		case r == '"':
			return `\"`
		case r == '\b':
			return `\b`
		case r == '\f':
			return `\f`
		case r < 0x20 || (r > 0x7e && r <= 0xffff):
			return `\u` + hex4(int(r))
		case r > 0xffff:
			r -= 0x10000
			return `\u` + hex4(0xd800+int(r>>10)) + `\u` + hex4(0xdc00+int(r&0x3ff))
		}
		return ""
	})
}

func hex4(v int) string {
	const d = "0123456789abcdef"
	return string([]byte{d[v>>12&15], d[v>>8&15], d[v>>4&15], d[v&15]})
}
