package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// ConfigFile is the Transformers model configuration.
const ConfigFile = "config.json"

// maxConfigBytes bounds config.json and the legacy quantization files.
const maxConfigBytes = 16 << 20

// provenanceKeys say where and with what a config was written, not what
// the model is; the structural digest drops them at every depth (a
// multimodal wrapper repeats them inside text_config and vision_config).
var provenanceKeys = map[string]bool{"_name_or_path": true, "transformers_version": true, "_commit_hash": true}

// ConfigStructDigest is the structural digest of a config.json
// (reference/evidence.md §2.4.3): the digest of its RFC 8785 form with the
// provenance-only keys removed. When the file cannot be parsed strictly
// (NaN or Infinity, integers beyond 2^53, duplicate keys, invalid UTF-8)
// the digest is nil and reason says why; the digest is never computed
// from a repaired copy.
func ConfigStructDigest(config []byte) (digest *string, reason string) {
	v, reason := strictConfig(config)
	if reason != "" {
		return nil, reason
	}
	strip(v)
	b, err := canonicalOf(v)
	if err != nil {
		return nil, "config.json: " + err.Error()
	}
	d := canon.Digest(b)
	return &d, ""
}

// ConfigDigest is the digest of the whole config.json in canonical form
// (provenance keys kept): what ArtifactSpec.ConfigDigest records.
func ConfigDigest(config []byte) (digest *string, reason string) {
	c, err := canon.Canonicalize(config)
	if err != nil {
		return nil, "config.json is not strict JSON: " + err.Error()
	}
	d := canon.Digest(c)
	return &d, ""
}

// strictConfig parses config after the strict I-JSON check, keeping
// numbers as written.
func strictConfig(config []byte) (any, string) {
	if _, err := canon.Canonicalize(config); err != nil {
		return nil, "config.json is not strict JSON: " + err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "config.json: " + err.Error()
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, "config.json is not a JSON object"
	}
	return v, ""
}

func strip(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if provenanceKeys[k] {
				delete(x, k)
				continue
			}
			strip(e)
		}
	case []any:
		for _, e := range x {
			strip(e)
		}
	}
}

// canonicalOf encodes a decoded JSON tree (json.Number kept) in RFC 8785 form.
func canonicalOf(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return canon.Canonicalize(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// QuantConfigFiles are where a checkpoint's quantization settings live,
// in the order they are looked for: config.json's quantization_config
// (or compression_config, the older compressed-tensors name), then the
// legacy files of AutoGPTQ (quantize_config.json), AutoAWQ
// (quant_config.json) and NVIDIA ModelOpt (hf_quant_config.json).
var QuantConfigFiles = []string{"quantize_config.json", "quant_config.json", "hf_quant_config.json"}

// QuantConfig is a checkpoint's quantization configuration as found: the
// file it came from, the JSON path inside it, and its canonical bytes.
type QuantConfig struct {
	File      string // "config.json" or a legacy file name
	Path      string // "quantization_config", "text_config.quantization_config", "" for a whole legacy file
	Canonical []byte // RFC 8785 bytes of the object
	Digest    string // digest of Canonical
}

// ReadConfig reads dir/config.json (nil, nil when absent).
func ReadConfig(dir string) ([]byte, error) {
	b, err := readSmall(filepath.Join(dir, ConfigFile), maxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &HeaderError{File: ConfigFile, Problem: "cannot read: " + errText(err)}
	}
	return b, nil
}

// ReadQuantConfig finds the quantization configuration of the checkpoint
// in dir: config.json's quantization_config (top level, then under
// text_config for multimodal wrappers), else the first legacy file
// present. found is false for an unquantized checkpoint. A file that is
// not strict JSON is a *HeaderError.
func ReadQuantConfig(dir string, config []byte) (q QuantConfig, found bool, err error) {
	if config != nil {
		v, reason := strictConfig(config)
		if reason != "" {
			return q, false, &HeaderError{File: ConfigFile, Problem: reason}
		}
		top := v.(map[string]any)
		for _, p := range [][]string{{"quantization_config"}, {"compression_config"}, {"text_config", "quantization_config"}} {
			if obj, ok := lookup(top, p); ok {
				return quantConfigOf(ConfigFile, joinPath(p), obj)
			}
		}
	}
	for _, name := range QuantConfigFiles {
		b, err := readSmall(filepath.Join(dir, name), maxConfigBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return q, false, &HeaderError{File: name, Problem: "cannot read: " + errText(err)}
		}
		v, reason := strictConfig(b)
		if reason != "" {
			return q, false, &HeaderError{File: name, Problem: reason}
		}
		return quantConfigOf(name, "", v)
	}
	return q, false, nil
}

func quantConfigOf(file, path string, v any) (QuantConfig, bool, error) {
	if _, ok := v.(map[string]any); !ok {
		return QuantConfig{}, false, &HeaderError{File: file, Problem: quoteOr(path, "the file") + " is not a JSON object"}
	}
	b, err := canonicalOf(v)
	if err != nil {
		return QuantConfig{}, false, &HeaderError{File: file, Problem: err.Error()}
	}
	return QuantConfig{File: file, Path: path, Canonical: b, Digest: canon.Digest(b)}, true, nil
}

func lookup(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, k := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[k]; !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}

func joinPath(p []string) string {
	out := p[0]
	for _, k := range p[1:] {
		out += "." + k
	}
	return out
}
