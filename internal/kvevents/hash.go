// Package kvevents is vLLM's prefix-cache vocabulary on the narwhal side:
// the chained block hashes vLLM's KV cache manager computes (so the router
// can name the blocks of a prompt it tokenized), the KV cache event batches
// vLLM publishes (BlockStored, BlockRemoved, AllBlocksCleared, msgpack), and
// vLLM's publisher and subscriber over ZeroMQ: PUB/SUB for the live stream,
// ROUTER/DEALER for the replay, through go-zeromq/zmq4 (pure Go: no cgo,
// no libzmq; tested against libzmq in interop_test.go).
package kvevents

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Algo is vLLM's --prefix-caching-hash-algo.
type Algo string

const (
	// SHA256 is vLLM's default: SHA-256 of the pickle (highest protocol)
	// of (parent_hash, tuple(token_ids), extra_keys).
	SHA256 Algo = "sha256"
	// SHA256CBOR is SHA-256 of the canonical CBOR of the same tuple.
	SHA256CBOR Algo = "sha256_cbor"
)

// Hash is one block's 32-byte hash.
type Hash [32]byte

// External is the block hash as KV events carry it: vLLM's
// maybe_convert_block_hash keeps the low 64 bits of the big-endian
// integer (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, on by default), i.e. the
// last eight bytes.
func (h Hash) External() uint64 { return binary.BigEndian.Uint64(h[24:]) }

// Hasher computes vLLM's block hashes for one engine configuration.
type Hasher struct {
	algo      Algo
	blockSize int
	none      Hash
}

// NewHasher builds a hasher for algo, block size and the engine's
// PYTHONHASHSEED. vLLM seeds every chain with NONE_HASH = hash_fn(seed);
// without PYTHONHASHSEED the seed is 32 random bytes per process and no
// one outside the engine can reproduce its hashes, so seed is required.
func NewHasher(algo Algo, blockSize int, seed string) (*Hasher, error) {
	if algo != SHA256 && algo != SHA256CBOR {
		return nil, fmt.Errorf("kvevents: hash algorithm %q is not supported (use sha256 or sha256_cbor)", algo)
	}
	if blockSize <= 0 {
		return nil, fmt.Errorf("kvevents: block size %d must be positive", blockSize)
	}
	h := &Hasher{algo: algo, blockSize: blockSize}
	if algo == SHA256 {
		h.none = sha256.Sum256(pickleString(seed))
	} else {
		h.none = sha256.Sum256(cborString(seed))
	}
	return h, nil
}

// NewHasherWithNone builds a hasher from a chain seed already computed
// (a residency snapshot's none_hash), for callers that never see the
// engine's PYTHONHASHSEED.
func NewHasherWithNone(algo Algo, blockSize int, none Hash) (*Hasher, error) {
	h, err := NewHasher(algo, blockSize, "")
	if err != nil {
		return nil, err
	}
	h.none = none
	return h, nil
}

// Algo is the hash algorithm.
func (h *Hasher) Algo() Algo { return h.algo }

// BlockSize is the tokens per block.
func (h *Hasher) BlockSize() int { return h.blockSize }

// NoneHash is the chain seed (vLLM's NONE_HASH).
func (h *Hasher) NoneHash() Hash { return h.none }

// Block is hash_block_tokens(parent, tokens, None): the hash of one full
// block given its parent's hash (NoneHash for the first block).
func (h *Hasher) Block(parent Hash, tokens []int) Hash {
	sum, _ := h.block(nil, parent, tokens)
	return sum
}

// block hashes one block, serializing into buf (returned for reuse).
func (h *Hasher) block(buf []byte, parent Hash, tokens []int) (Hash, []byte) {
	if h.algo == SHA256 {
		buf = appendPickleBlock(buf[:0], parent, tokens)
	} else {
		buf = appendCBORBlock(buf[:0], parent, tokens)
	}
	return sha256.Sum256(buf), buf
}

// Prompt hashes the full blocks of a prompt in order (a partial last block
// has no hash, as in vLLM). A Hasher is safe for concurrent use.
func (h *Hasher) Prompt(tokens []int) []Hash {
	n := len(tokens) / h.blockSize
	out := make([]Hash, n)
	parent := h.none
	var buf []byte
	for b := range n {
		parent, buf = h.block(buf, parent, tokens[b*h.blockSize:(b+1)*h.blockSize])
		out[b] = parent
	}
	return out
}

// Externals is Prompt as the 64-bit hashes KV events carry.
func (h *Hasher) Externals(tokens []int) []uint64 {
	hs := h.Prompt(tokens)
	out := make([]uint64, len(hs))
	for i, x := range hs {
		out[i] = x.External()
	}
	return out
}
