package artifact

import (
	"math/bits"
	"slices"
)

// dtypeBits is every dtype the safetensors format defines, with its element
// width in bits, as huggingface/safetensors safetensors/src/tensor.rs
// (Dtype::bitsize) and its Python bindings list them
// (https://github.com/huggingface/safetensors/blob/main/safetensors/src/tensor.rs).
//
// Packed quantized payloads are not dtypes of their own: checkpoints store
// them in an ordinary integer dtype and the quantization method says how
// to unpack them. gpt-oss MXFP4 stores two FP4 (E2M1) values per byte as U8
// "…_blocks" [.., n/32, 16] with E8M0 exponents as U8 "…_scales"; NVFP4
// (ModelOpt and compressed-tensors) stores two FP4 values per byte as U8 with
// F8_E4M3 per-16-element scales and F32 global scales; AWQ and GPTQ pack eight
// 4-bit values into each I32. The byte size of such a tensor is therefore
// exactly its stored shape × the stored dtype's width, which is what this
// table gives; unpacking belongs to the quant package.
var dtypeBits = map[DType]int{
	"BOOL": 8,
	"F4":   4, // OCP MX FP4 (E2M1), two per byte
	// OCP MX FP6; a tensor of them must end on a byte boundary.
	"F6_E2M3": 6,
	"F6_E3M2": 6,
	"U8":      8,
	"I8":      8,
	"F8_E5M2": 8,
	"F8_E4M3": 8,
	"F8_E8M0": 8, // OCP MX scale (exponent only)
	// The AMD "fnuz" FP8 variants (no negative zero, NaN at 0x80).
	"F8_E4M3FNUZ": 8,
	"F8_E5M2FNUZ": 8,
	"I16":         16,
	"U16":         16,
	"F16":         16,
	"BF16":        16,
	"I32":         32,
	"U32":         32,
	"F32":         32,
	"C64":         64,
	"F64":         64,
	"I64":         64,
	"U64":         64,
}

// KnownDTypes returns every dtype this build knows, sorted by name.
func KnownDTypes() []DType {
	out := make([]DType, 0, len(dtypeBits))
	for d := range dtypeBits {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Known reports whether d is a dtype this build can size.
func (d DType) Known() bool {
	_, ok := dtypeBits[d]
	return ok
}

// Bits is the element width of d in bits, or 0 and false for a dtype this
// build does not know (its size is never guessed).
func (d DType) Bits() (int, bool) {
	b, ok := dtypeBits[d]
	return b, ok
}

// Elements is the product of shape ([] is a scalar: 1 element). ok is false
// for a negative dimension or a product beyond int64.
func Elements(shape []int64) (n int64, ok bool) {
	n = 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 0, false
		}
		n = int64(lo)
	}
	return n, true
}

// SizeStatus says why SizeOf could or could not give a byte count.
type SizeStatus string

const (
	SizeOK           SizeStatus = "ok"
	SizeUnknownDType SizeStatus = "unknown_dtype"    // dtype not in the table: bytes only from data_offsets
	SizeNotByteAlign SizeStatus = "not_byte_aligned" // sub-byte dtype whose element count does not fill whole bytes
	SizeBadShape     SizeStatus = "bad_shape"        // negative dimension or overflow
)

// SizeOf is the byte size shape × d occupies in a safetensors buffer. A
// sub-byte dtype must fill whole bytes, as the reference reader requires.
func SizeOf(d DType, shape []int64) (int64, SizeStatus) {
	b, ok := d.Bits()
	if !ok {
		return 0, SizeUnknownDType
	}
	n, ok := Elements(shape)
	if !ok {
		return 0, SizeBadShape
	}
	hi, lo := bits.Mul64(uint64(n), uint64(b))
	if hi != 0 || lo > 1<<62 {
		return 0, SizeBadShape
	}
	if lo%8 != 0 {
		return 0, SizeNotByteAlign
	}
	return int64(lo / 8), SizeOK
}
