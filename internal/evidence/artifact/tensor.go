// Package artifact reads what a model artifact is from its files without
// reading its weights: safetensors headers (single file or sharded
// through model.safetensors.index.json), config.json, and the locator,
// source observation, identity and lineage fingerprint of ADR-006
// (reference/evidence.md §2.4, §2.5). Types and hashing are
// deterministic; the file readers are adapters.
package artifact

// DType is a tensor's dtype exactly as its safetensors header spells it
// ("BF16", "F8_E4M3", "U8", …). A dtype this build does not know is kept
// verbatim and reported by Known as unknown; its size is never guessed.
type DType string

// Tensor is one tensor's header entry. Bytes is the payload size the
// header's data_offsets give (end − begin); it is what the tensor costs
// in memory when loaded as stored, packed payloads and scales included.
type Tensor struct {
	Name  string  `json:"name"`
	DType DType   `json:"dtype"`
	Shape []int64 `json:"shape"`
	Bytes int64   `json:"bytes"`
	File  string  `json:"file"` // the shard file, relative to the model directory
}

// Headers are every tensor of an artifact, sorted by name, with the
// shard files they came from. Metadata is each file's __metadata__
// block (string to string, as the format defines it), by file.
type Headers struct {
	Tensors  []Tensor                     `json:"tensors"`
	Files    []string                     `json:"files"`
	Metadata map[string]map[string]string `json:"metadata"`
	// IndexTotalSize is model.safetensors.index.json's metadata.total_size
	// when present: a hint only, never used for accounting.
	IndexTotalSize *int64 `json:"index_total_size"`
	// Warnings are findings that do not stop planning (for example a
	// total_size that disagrees with the headers), one line each.
	Warnings []string `json:"warnings"`
}
