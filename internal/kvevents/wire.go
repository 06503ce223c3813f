package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// vLLM encodes an EventBatch with msgspec as a positional array
// [ts, events, data_parallel_rank] (array_like=True; publish() always
// stamps the rank). Each event is tagged by its class name. Until
// vllm-project/vllm#42892 (merged 2026-06-09, commit 5b3807e862) an event
// was an array [tag, field…] in declaration order; since, it is a map
// {"type": tag, field name: value…} with fields at their default left out
// (omit_defaults=True). DecodeBatch reads both, and skips fields and
// event kinds it does not know; Encode writes the current map form.
//
// Field order and names, read from vLLM's own files:
//   - https://github.com/vllm-project/vllm/blob/b4e69e0af33f4698e157a262cc787fe61983cd3d/vllm/distributed/kv_events.py
//     (array_like events: BlockStored block_hashes, parent_block_hash,
//     token_ids, block_size, lora_id; BlockRemoved block_hashes);
//   - https://github.com/vllm-project/vllm/blob/0181ea3173e53eea8cf04a86891488e3dc89bb34/vllm/distributed/kv_events.py
//     (map events; BlockStored adds medium, lora_name, extra_keys,
//     group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window;
//     BlockRemoved adds medium, group_idx). At this commit EventBatch
//     carries no array_like either, so a map-shaped batch {"ts",
//     "events", "data_parallel_rank"} is read too;
//   - https://github.com/vllm-project/vllm/blob/1bd773f6a52899e189c8237e55473cda0074f2fb/examples/features/kv_events/kv_events_subscriber.py
//     (vLLM's subscriber after #42892: EventBatch array_like=True,
//     KVCacheEvent a tagged map).

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
	DPRank int // data_parallel_rank: the engine's data-parallel rank (0 without data parallelism)
}

// Encode writes b as the current vLLM publisher does: a positional batch
// of tagged map events, each with the fields vLLM always sends (lora_id,
// medium, lora_name are declared without a default) and group_idx, which
// its scheduler always sets.
func (b Batch) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	must := errors.Join(enc.EncodeArrayLen(3), enc.EncodeFloat64(b.TS), enc.EncodeArrayLen(len(b.Events)))
	for _, e := range b.Events {
		must = errors.Join(must, encodeEvent(enc, e))
	}
	must = errors.Join(must, enc.EncodeInt(int64(b.DPRank)))
	return buf.Bytes(), must
}

// mapEncoder writes one tagged map's keys and values, keeping the first
// error.
type mapEncoder struct {
	enc *msgpack.Encoder
	err error
}

func (m *mapEncoder) put(key string, value func() error) {
	m.err = errors.Join(m.err, m.enc.EncodeString(key), value())
}

func encodeEvent(enc *msgpack.Encoder, e Event) error {
	m := &mapEncoder{enc: enc}
	str := func(v string) func() error { return func() error { return enc.EncodeString(v) } }
	num := func(v int) func() error { return func() error { return enc.EncodeInt(int64(v)) } }
	null := func() error { return enc.EncodeNil() }
	medium := null
	if e.Medium != "" {
		medium = str(e.Medium)
	}
	switch e.Kind {
	case KindStored:
		m.err = enc.EncodeMapLen(9)
		m.put("type", str(e.Kind))
		m.put("block_hashes", func() error { return encodeHashes(enc, e.Hashes) })
		m.put("parent_block_hash", func() error {
			if e.Parent == nil {
				return enc.EncodeNil()
			}
			return enc.EncodeUint(*e.Parent)
		})
		m.put("token_ids", func() error { return encodeInts(enc, e.TokenIDs) })
		m.put("block_size", num(e.BlockSize))
		m.put("lora_id", null)
		m.put("medium", medium)
		m.put("lora_name", null)
		m.put("group_idx", num(e.GroupIdx))
	case KindRemoved:
		m.err = enc.EncodeMapLen(4)
		m.put("type", str(e.Kind))
		m.put("block_hashes", func() error { return encodeHashes(enc, e.Hashes) })
		m.put("medium", medium)
		m.put("group_idx", num(e.GroupIdx))
	case KindCleared:
		m.err = enc.EncodeMapLen(1)
		m.put("type", str(e.Kind))
	default:
		return fmt.Errorf("kvevents: unknown event kind %q", e.Kind)
	}
	return m.err
}

func encodeHashes(enc *msgpack.Encoder, hs []uint64) error {
	err := enc.EncodeArrayLen(len(hs))
	for _, h := range hs {
		err = errors.Join(err, enc.EncodeUint(h))
	}
	return err
}

func encodeInts(enc *msgpack.Encoder, vs []int) error {
	err := enc.EncodeArrayLen(len(vs))
	for _, v := range vs {
		err = errors.Join(err, enc.EncodeInt(int64(v)))
	}
	return err
}

// DecodeBatch reads one EventBatch payload.
func DecodeBatch(p []byte) (Batch, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(p))
	if isMap(dec) {
		return decodeBatchMap(dec)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 2 {
		return Batch{}, fmt.Errorf("kvevents: event batch is not an array of at least 2 (%v)", err)
	}
	var b Batch
	if b.TS, err = dec.DecodeFloat64(); err != nil {
		return Batch{}, fmt.Errorf("kvevents: event batch ts: %w", err)
	}
	if b.Events, err = decodeEvents(dec); err != nil {
		return Batch{}, err
	}
	if n > 2 {
		if b.DPRank, err = decodeOptInt(dec); err != nil {
			return Batch{}, fmt.Errorf("kvevents: event batch data_parallel_rank: %w", err)
		}
	}
	return b, skipN(dec, n-3)
}

// decodeBatchMap reads a batch encoded as a map (EventBatch without
// array_like).
func decodeBatchMap(dec *msgpack.Decoder) (Batch, error) {
	var b Batch
	var ts, events bool
	err := eachKey(dec, func(key []byte) (err error) {
		switch string(key) {
		case "ts":
			ts = true
			b.TS, err = dec.DecodeFloat64()
		case "events":
			events = true
			b.Events, err = decodeEvents(dec)
		case "data_parallel_rank":
			b.DPRank, err = decodeOptInt(dec)
		default:
			err = dec.Skip()
		}
		return err
	})
	if err == nil && (!ts || !events) {
		err = errors.New("no ts or no events")
	}
	if err != nil {
		return Batch{}, fmt.Errorf("kvevents: event batch map: %w", err)
	}
	return b, nil
}

// eachKey reads a map, handing each string key to fn to read its value.
// The key is only valid during fn: keys are read into one buffer, not
// allocated, since every event repeats the same few names.
func eachKey(dec *msgpack.Decoder, fn func(key []byte) error) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	var buf [32]byte // vLLM's longest field name has 28 bytes
	for range n {
		key, err := readStr(dec, buf[:])
		if err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// readStr reads a string into buf when it fits (else into a new slice).
func readStr(dec *msgpack.Decoder, buf []byte) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > len(buf) {
		buf = make([]byte, n)
	}
	return buf[:n], dec.ReadFull(buf[:n])
}

// kindOf names an event's tag without allocating for the kinds narwhal
// reads.
func kindOf(tag []byte) string {
	switch string(tag) {
	case KindStored:
		return KindStored
	case KindRemoved:
		return KindRemoved
	case KindCleared:
		return KindCleared
	}
	return string(tag)
}

// isMap says whether the next value is a map.
func isMap(dec *msgpack.Decoder) bool {
	c, err := dec.PeekCode()
	return err == nil && (msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32)
}

func decodeEvents(dec *msgpack.Decoder) ([]Event, error) {
	m, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, fmt.Errorf("kvevents: event batch events: %w", err)
	}
	var out []Event
	for i := 0; i < m; i++ {
		e, err := decodeEvent(dec)
		if err != nil {
			return nil, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		if e.Kind != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

func decodeEvent(dec *msgpack.Decoder) (Event, error) {
	if isMap(dec) {
		return decodeEventMap(dec)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 1 {
		return Event{}, fmt.Errorf("neither a tagged map nor a tagged array (%v)", err)
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

// decodeEventMap reads a tagged map event by field name, whatever the
// order; an unknown "type" is skipped like an unknown array tag.
func decodeEventMap(dec *msgpack.Decoder) (Event, error) {
	var e Event
	var hashes, tokens, size bool // the fields BlockStored cannot do without
	var tag [16]byte
	err := eachKey(dec, func(key []byte) (err error) {
		switch string(key) {
		case "type":
			var b []byte
			b, err = readStr(dec, tag[:])
			e.Kind = kindOf(b)
		case "block_hashes":
			hashes = true
			e.Hashes, err = decodeHashes(dec)
		case "parent_block_hash":
			e.Parent, err = decodeOptHash(dec)
		case "token_ids":
			tokens = true
			e.TokenIDs, err = decodeInts(dec)
		case "block_size":
			size = true
			e.BlockSize, err = dec.DecodeInt()
		case "medium":
			e.Medium, err = decodeOptString(dec)
		case "group_idx":
			e.GroupIdx, err = decodeOptInt(dec)
		default:
			err = dec.Skip()
		}
		return err
	})
	if err != nil {
		return Event{}, err
	}
	switch e.Kind {
	case KindStored:
		if !hashes || !tokens || !size {
			return Event{}, errors.New("BlockStored without block_hashes, token_ids or block_size")
		}
	case KindRemoved:
		if !hashes {
			return Event{}, errors.New("BlockRemoved without block_hashes")
		}
	case KindCleared:
	case "":
		return Event{}, errors.New("an event map without its \"type\" tag")
	default:
		return Event{}, nil // an event kind this version does not know: skipped
	}
	return e, nil
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
// BLOCK_HASHES=0) reduced the same way vLLM reduces it to an int:
// int.from_bytes(hash_bytes, "big") & (1<<64)-1, the last 8 bytes
// (maybe_convert_block_hash in
// https://github.com/vllm-project/vllm/blob/001cabc1be16a59a70d720ed61a13b678c060a18/vllm/v1/core/kv_cache_utils.py).
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
