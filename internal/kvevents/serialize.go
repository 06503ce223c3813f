package kvevents

import (
	"encoding/binary"
	"math/big"
)

// The two serializations vLLM hashes, for exactly the values a block hash
// takes: a 32-byte parent hash, a tuple of non-negative token ids, and
// None for the extra keys (no LoRA, no multimodal input, no cache salt), and
// the PYTHONHASHSEED string that seeds the chain.

// Pickle opcodes (Python's Lib/pickle.py), protocol 5 as
// pickle.HIGHEST_PROTOCOL writes them.
const (
	opProto         = 0x80
	opFrame         = 0x95
	opShortBinBytes = 'C'
	opBinBytes      = 'B'
	opShortBinUni   = 0x8c
	opBinUnicode    = 'X'
	opMemoize       = 0x94
	opMark          = '('
	opTuple         = 't'
	opEmptyTuple    = ')'
	opTuple1        = 0x85
	opTuple2        = 0x86
	opTuple3        = 0x87
	opBinInt1       = 'K'
	opBinInt2       = 'M'
	opBinInt        = 'J'
	opLong1         = 0x8a
	opNone          = 'N'
	opStop          = '.'
)

// pickleFramed wraps a pickle body in PROTO 5 and one FRAME, as the C
// pickler does for pickles under its 64 KiB frame target.
func pickleFramed(body []byte) []byte {
	out := make([]byte, 0, len(body)+12)
	out = append(out, opProto, 5)
	if len(body) >= 4 {
		out = append(out, opFrame)
		out = binary.LittleEndian.AppendUint64(out, uint64(len(body)))
	}
	return append(out, body...)
}

func pickleString(s string) []byte {
	var b []byte
	if len(s) < 256 {
		b = append(b, opShortBinUni, byte(len(s)))
	} else {
		b = append(b, opBinUnicode)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	}
	b = append(b, s...)
	return pickleFramed(append(b, opMemoize, opStop))
}

func appendPickleBlock(dst []byte, parent Hash, tokens []int) []byte {
	body := make([]byte, 0, 48+len(tokens)*5)
	body = append(body, opShortBinBytes, 32)
	body = append(body, parent[:]...)
	body = append(body, opMemoize)
	switch len(tokens) {
	case 0:
		body = append(body, opEmptyTuple)
	case 1, 2, 3:
		for _, t := range tokens {
			body = appendPickleInt(body, t)
		}
		body = append(body, opTuple1+byte(len(tokens)-1))
	default:
		body = append(body, opMark)
		for _, t := range tokens {
			body = appendPickleInt(body, t)
		}
		body = append(body, opTuple)
	}
	if len(tokens) > 0 {
		body = append(body, opMemoize) // the empty tuple is a singleton pickle does not memoize
	}
	body = append(body, opNone, opTuple3, opMemoize, opStop)
	return append(dst, pickleFramed(body)...)
}

// appendPickleInt writes n the way save_long picks its opcode.
func appendPickleInt(b []byte, n int) []byte {
	switch {
	case n >= 0 && n <= 0xff:
		return append(b, opBinInt1, byte(n))
	case n >= 0 && n <= 0xffff:
		return append(b, opBinInt2, byte(n), byte(n>>8))
	case n >= -1<<31 && n < 1<<31:
		return binary.LittleEndian.AppendUint32(append(b, opBinInt), uint32(int32(n)))
	}
	enc := longBytes(n)
	b = append(b, opLong1, byte(len(enc)))
	return append(b, enc...)
}

// longBytes is pickle's encode_long: little-endian two's complement in
// bit_length/8+1 bytes.
func longBytes(n int) []byte {
	size := big.NewInt(int64(n)).BitLen()/8 + 1
	out := make([]byte, size)
	u := uint64(n)
	for i := range out {
		out[i] = byte(u)
		u >>= 8
		if n < 0 {
			u |= 0xff << 56
		}
	}
	return out
}

// CBOR (RFC 8949) with cbor2's canonical=True choices: shortest heads.
func cborHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func cborString(s string) []byte {
	return append(cborHead(nil, 3, uint64(len(s))), s...)
}

func appendCBORBlock(dst []byte, parent Hash, tokens []int) []byte {
	dst = cborHead(dst, 4, 3)
	dst = cborHead(dst, 2, 32)
	dst = append(dst, parent[:]...)
	dst = cborHead(dst, 4, uint64(len(tokens)))
	for _, t := range tokens {
		if t >= 0 {
			dst = cborHead(dst, 0, uint64(t))
		} else {
			dst = cborHead(dst, 1, uint64(-1-t))
		}
	}
	return append(dst, 0xf6) // null: no extra keys
}
