package artifact

import (
	"errors"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Lineage formats.
const (
	FormatSafetensors = "safetensors"
	FormatGGUF        = "gguf"
)

// TensorSetKind names the object the tensor-set digest is taken over.
const TensorSetKind = "narwhal.lineage.tensor_set"

// LineageFingerprint is structural similarity (reference/evidence.md
// §2.4): equal fingerprints mean the same tensor schema (and, with the
// config digest, the same structure), never the same weights and never a
// derivation.
type LineageFingerprint struct {
	TensorSetDigest    string  `json:"tensor_set_digest" ev:"id"`
	ConfigStructDigest *string `json:"config_struct_digest" ev:"id"` // tie-break
	// ConfigStructNullReason says why ConfigStructDigest is null (no
	// config.json, or one that is not strict JSON). narwhal addition to
	// §2.4.2: the reference says the reason is recorded but names no field.
	ConfigStructNullReason *string `json:"config_struct_null_reason" ev:"display"`
	TokenizerDigest        *string `json:"tokenizer_digest" ev:"display"` // recorded, not lineage
	ResolvedRevision       string  `json:"resolved_revision" ev:"display"`
	Format                 string  `json:"format" ev:"id"`
}

type tensorSet struct {
	Kind    string  `json:"kind"`
	Version int     `json:"version"`
	Tensors [][]any `json:"tensors"`
}

// TensorSetDigest digests the set of (name, dtype, shape) over every
// shard, sorted by name; shard assignment, offsets and __metadata__ do
// not enter it, so re-sharding keeps the digest.
func TensorSetDigest(ts []Tensor) (string, error) {
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b Tensor) int { return utf16Less(a.Name, b.Name) })
	rows := make([][]any, len(sorted))
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return "", errors.New("tensor set: " + t.Name + " appears twice")
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		rows[i] = []any{t.Name, string(t.DType), shape}
	}
	_, d, err := canon.MarshalDigest(tensorSet{Kind: TensorSetKind, Version: 1, Tensors: rows})
	return d, err
}

// tokenizerFiles are the root files the tokenizer digest covers, with the
// chat-template files.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"}
var chatTemplateFiles = []string{"chat_template.jinja", "chat_template.json"}

func pickDigest(files []FileDigest, keep func(string) bool) *string {
	var rows [][2]string
	for _, f := range sortedFiles(files) {
		if keep(f.Path) {
			rows = append(rows, [2]string{f.Path, f.SHA256})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	_, d, err := canon.MarshalDigest(rows)
	if err != nil {
		return nil
	}
	return &d
}

func isChatTemplate(p string) bool {
	return slices.Contains(chatTemplateFiles, p) || strings.HasPrefix(p, "additional_chat_templates/")
}

// TokenizerDigest is the digest over sorted [path, sha256] of the
// tokenizer and chat-template files present (nil when there are none).
func TokenizerDigest(files []FileDigest) *string {
	return pickDigest(files, func(p string) bool { return slices.Contains(tokenizerFiles, p) || isChatTemplate(p) })
}

// ChatTemplateDigest covers the chat-template files alone.
func ChatTemplateDigest(files []FileDigest) *string {
	return pickDigest(files, isChatTemplate)
}

// Lineage computes the lineage fingerprint of a safetensors checkpoint
// from its headers, its config.json bytes (nil when absent) and its file
// digests (for the tokenizer digest; nil when unresolved).
func Lineage(h Headers, config []byte, files []FileDigest, resolvedRevision string) (LineageFingerprint, error) {
	ts, err := TensorSetDigest(h.Tensors)
	if err != nil {
		return LineageFingerprint{}, err
	}
	lf := LineageFingerprint{TensorSetDigest: ts, TokenizerDigest: TokenizerDigest(files), ResolvedRevision: resolvedRevision, Format: FormatSafetensors}
	if config == nil {
		r := "no config.json"
		lf.ConfigStructNullReason = &r
		return lf, nil
	}
	d, reason := ConfigStructDigest(config)
	lf.ConfigStructDigest = d
	if d == nil {
		lf.ConfigStructNullReason = &reason
	}
	return lf, nil
}

// SameSchema: equal tensor sets (and format). Says nothing about weights.
func SameSchema(a, b LineageFingerprint) bool {
	return a.Format == b.Format && a.TensorSetDigest == b.TensorSetDigest
}

// SameStructure: equal tensor sets and equal, non-null config digests.
func SameStructure(a, b LineageFingerprint) bool {
	return SameSchema(a, b) && a.ConfigStructDigest != nil && b.ConfigStructDigest != nil &&
		*a.ConfigStructDigest == *b.ConfigStructDigest
}
