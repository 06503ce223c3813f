package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Missing lists the contract fields that are not declared, sorted. A field
// is undeclared when it is null, "" or, for a count, 0. vllm_version,
// connector and enforce_handshake_compat are not listed: validation already
// requires them. Lifecycle drain and readmission need an empty list.
func (k *EngineContract) Missing() []string {
	var out []string
	check := func(name string, declared bool) {
		if !declared {
			out = append(out, name)
		}
	}
	check("image_digest", k.ImageDigest != "")
	check("nixl_version", k.NIXLVersion != "")
	check("nixl_connector_version", k.NIXLConnectorVersion != 0)
	check("model_architecture", k.ModelArchitecture != "")
	check("model_dtype", k.ModelDtype != "")
	check("kv_heads", k.KVHeads != 0)
	check("head_size", k.HeadSize != 0)
	check("hidden_layers", k.HiddenLayers != 0)
	check("attention_backend", k.AttentionBackend != "")
	check("kv_cache_dtype", k.KVCacheDtype != "")
	check("cross_layers_blocks", k.CrossLayersBlocks != nil)
	check("hybrid_kv_cache_manager", k.HybridKVCacheManager != nil)
	check("kv_role", k.KVRole != "")
	check("transfer_mode", k.TransferMode != "")
	check("speculative_config", k.SpeculativeConfig != "")
	sort.Strings(out)
	return out
}

// Complete reports whether every contract field is declared.
func (k *EngineContract) Complete() bool { return len(k.Missing()) == 0 }

// Fingerprint is the first 16 hex characters of SHA-256 over the contract's
// canonical text. Profiles and calibration artifacts bind to it, so the
// text matches the reference byte for byte: keys sorted, compact
// separators, strings escaped as Python's json.dumps does by default.
func (k *EngineContract) Fingerprint() string {
	sum := sha256.Sum256([]byte(k.canonicalText()))
	return hex.EncodeToString(sum[:])[:16]
}

func (k *EngineContract) canonicalText() string {
	fields := map[string]string{
		"vllm_version":             pyString(k.VLLMVersion),
		"image_digest":             pyString(k.ImageDigest),
		"nixl_version":             pyString(k.NIXLVersion),
		"nixl_connector_version":   strconv.Itoa(k.NIXLConnectorVersion),
		"model_architecture":       pyString(k.ModelArchitecture),
		"model_dtype":              pyString(k.ModelDtype),
		"kv_heads":                 strconv.Itoa(k.KVHeads),
		"head_size":                strconv.Itoa(k.HeadSize),
		"hidden_layers":            strconv.Itoa(k.HiddenLayers),
		"attention_backend":        pyString(k.AttentionBackend),
		"kv_cache_dtype":           pyString(k.KVCacheDtype),
		"cross_layers_blocks":      pyOptBool(k.CrossLayersBlocks),
		"hybrid_kv_cache_manager":  pyOptBool(k.HybridKVCacheManager),
		"connector":                pyString(k.Connector),
		"kv_role":                  pyString(k.KVRole),
		"transfer_mode":            pyString(k.TransferMode),
		"speculative_config":       pyString(k.SpeculativeConfig),
		"enforce_handshake_compat": strconv.FormatBool(k.EnforceHandshakeCompat),
	}
	keys := make([]string, 0, len(fields))
	for name := range fields {
		keys = append(keys, name)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pyString(name))
		b.WriteByte(':')
		b.WriteString(fields[name])
	}
	b.WriteByte('}')
	return b.String()
}

func pyOptBool(b *bool) string {
	if b == nil {
		return "null"
	}
	return strconv.FormatBool(*b)
}

// pyString quotes s as Python's json.dumps(ensure_ascii=True) does: short
// escapes for " \ \b \f \n \r \t, \uXXXX for everything else outside
// printable ASCII (surrogate pairs above U+FFFF), and nothing else escaped.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r > 0xffff:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			default:
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
