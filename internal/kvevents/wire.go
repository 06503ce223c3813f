package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// vLLM encodes its event structs with msgspec (array_like, tagged): a
// batch is [ts, events, data_parallel_rank?], an event is [tag, field…]
// in declaration order. Decoding reads the fields narwhal uses by position
// and skips any that later vLLM versions append.

// Event kinds, as msgspec tags them.
const (
	KindStored  = "BlockStored"
	KindRemoved = "BlockRemoved"
	KindCleared = "AllBlocksCleared"
)

// Event is one KV cache event.
type Event struct {
	Kind      string
	Hashes    []uint64 // Stored, Removed
	Parent    *uint64  // Stored: nil for a chain's first block
	TokenIDs  []int    // Stored
	BlockSize int      // Stored
	Medium    string   // "GPU" when set
	GroupIdx  int      // KV cache group (0 unless hybrid)
}

// Batch is one published EventBatch.
type Batch struct {
	TS     float64
	Events []Event
}

// Encode writes b as vLLM's publisher does (pinned field set: BlockStored
// up to lora_name, BlockRemoved up to medium).
func (b Batch) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	must := errors.Join(enc.EncodeArrayLen(2), enc.EncodeFloat64(b.TS), enc.EncodeArrayLen(len(b.Events)))
	for _, e := range b.Events {
		must = errors.Join(must, encodeEvent(enc, e))
	}
	return buf.Bytes(), must
}

func encodeEvent(enc *msgpack.Encoder, e Event) error {
	medium := func() error {
		if e.Medium == "" {
			return enc.EncodeNil()
		}
		return enc.EncodeString(e.Medium)
	}
	switch e.Kind {
	case KindStored:
		err := errors.Join(enc.EncodeArrayLen(8), enc.EncodeString(e.Kind), encodeHashes(enc, e.Hashes))
		if e.Parent == nil {
			err = errors.Join(err, enc.EncodeNil())
		} else {
			err = errors.Join(err, enc.EncodeUint(*e.Parent))
		}
		err = errors.Join(err, enc.EncodeArrayLen(len(e.TokenIDs)))
		for _, t := range e.TokenIDs {
			err = errors.Join(err, enc.EncodeInt(int64(t)))
		}
		return errors.Join(err, enc.EncodeInt(int64(e.BlockSize)), enc.EncodeNil(), medium(), enc.EncodeNil())
	case KindRemoved:
		return errors.Join(enc.EncodeArrayLen(3), enc.EncodeString(e.Kind), encodeHashes(enc, e.Hashes), medium())
	case KindCleared:
		return errors.Join(enc.EncodeArrayLen(1), enc.EncodeString(e.Kind))
	}
	return fmt.Errorf("kvevents: unknown event kind %q", e.Kind)
}

func encodeHashes(enc *msgpack.Encoder, hs []uint64) error {
	err := enc.EncodeArrayLen(len(hs))
	for _, h := range hs {
		err = errors.Join(err, enc.EncodeUint(h))
	}
	return err
}

// DecodeBatch reads one EventBatch payload.
func DecodeBatch(p []byte) (Batch, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(p))
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 2 {
		return Batch{}, fmt.Errorf("kvevents: event batch is not an array of at least 2 (%v)", err)
	}
	var b Batch
	if b.TS, err = dec.DecodeFloat64(); err != nil {
		return Batch{}, fmt.Errorf("kvevents: event batch ts: %w", err)
	}
	m, err := dec.DecodeArrayLen()
	if err != nil {
		return Batch{}, fmt.Errorf("kvevents: event batch events: %w", err)
	}
	for i := 0; i < m; i++ {
		e, err := decodeEvent(dec)
		if err != nil {
			return Batch{}, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		if e.Kind != "" {
			b.Events = append(b.Events, e)
		}
	}
	return b, skipN(dec, n-2)
}

func decodeEvent(dec *msgpack.Decoder) (Event, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 1 {
		return Event{}, fmt.Errorf("not a tagged array (%v)", err)
	}
	var e Event
	if e.Kind, err = dec.DecodeString(); err != nil {
		return Event{}, err
	}
	read := 0
	switch e.Kind {
	case KindStored:
		read, err = decodeStored(dec, &e, n-1)
	case KindRemoved:
		read, err = decodeRemoved(dec, &e, n-1)
	case KindCleared:
	default:
		e.Kind = "" // an event kind this version does not know: skipped
	}
	if err != nil {
		return Event{}, err
	}
	return e, skipN(dec, n-1-read)
}

// decodeStored reads block_hashes, parent_block_hash, token_ids,
// block_size, lora_id, medium, lora_name, extra_keys, group_idx.
func decodeStored(dec *msgpack.Decoder, e *Event, n int) (int, error) {
	if n < 4 {
		return 0, fmt.Errorf("BlockStored has %d fields, want at least 4", n)
	}
	var err error
	if e.Hashes, err = decodeHashes(dec); err != nil {
		return 0, err
	}
	if e.Parent, err = decodeOptHash(dec); err != nil {
		return 0, err
	}
	if e.TokenIDs, err = decodeInts(dec); err != nil {
		return 0, err
	}
	if e.BlockSize, err = dec.DecodeInt(); err != nil {
		return 0, err
	}
	read := 4
	for ; read < n && read < 9; read++ {
		switch read {
		case 5:
			e.Medium, err = decodeOptString(dec)
		case 8:
			e.GroupIdx, err = decodeOptInt(dec)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return 0, err
		}
	}
	return read, nil
}

// decodeRemoved reads block_hashes, medium, group_idx.
func decodeRemoved(dec *msgpack.Decoder, e *Event, n int) (int, error) {
	if n < 1 {
		return 0, errors.New("BlockRemoved has no block_hashes")
	}
	var err error
	if e.Hashes, err = decodeHashes(dec); err != nil {
		return 0, err
	}
	read := 1
	if read < n {
		if e.Medium, err = decodeOptString(dec); err != nil {
			return 0, err
		}
		read++
	}
	if read < n {
		if e.GroupIdx, err = decodeOptInt(dec); err != nil {
			return 0, err
		}
		read++
	}
	return read, nil
}

func decodeHashes(dec *msgpack.Decoder) ([]uint64, error) { return decodeArray(dec, decodeHash) }

// decodeArray reads an array whose items one reads with item.
func decodeArray[T any](dec *msgpack.Decoder, item func(*msgpack.Decoder) (T, error)) ([]T, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, max(n, 0))
	for range n {
		v, err := item(dec)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// decodeHash takes an int hash, or a bytes hash (VLLM_KV_EVENTS_USE_INT_
// BLOCK_HASHES=0) reduced the same way vLLM reduces it to an int.
func decodeHash(dec *msgpack.Decoder) (uint64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsBin(c) || msgpcode.IsString(c) {
		b, err := dec.DecodeBytes()
		if err != nil {
			return 0, err
		}
		var tail [8]byte
		copy(tail[max(0, 8-len(b)):], b[max(0, len(b)-8):])
		return binary.BigEndian.Uint64(tail[:]), nil
	}
	return dec.DecodeUint64()
}

func decodeOptHash(dec *msgpack.Decoder) (*uint64, error) {
	if c, err := dec.PeekCode(); err != nil || c == msgpcode.Nil {
		return nil, errors.Join(err, dec.Skip())
	}
	h, err := decodeHash(dec)
	return &h, err
}

func decodeInts(dec *msgpack.Decoder) ([]int, error) {
	return decodeArray(dec, (*msgpack.Decoder).DecodeInt)
}

func decodeOptString(dec *msgpack.Decoder) (string, error) {
	if c, err := dec.PeekCode(); err != nil || c == msgpcode.Nil {
		return "", errors.Join(err, dec.Skip())
	}
	return dec.DecodeString()
}

func decodeOptInt(dec *msgpack.Decoder) (int, error) {
	if c, err := dec.PeekCode(); err != nil || c == msgpcode.Nil {
		return 0, errors.Join(err, dec.Skip())
	}
	return dec.DecodeInt()
}

func skipN(dec *msgpack.Decoder, n int) error {
	for range n {
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}
