package kvevents

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"
)

func TestBatchRoundTrip(t *testing.T) {
	parent := uint64(1<<63 + 5)
	in := Batch{TS: 12.5, Events: []Event{
		{Kind: KindStored, Hashes: []uint64{1, 1 << 62}, Parent: &parent, TokenIDs: []int{1, 2, 3, 1 << 40}, BlockSize: 2, Medium: "GPU"},
		{Kind: KindStored, Hashes: []uint64{9}, TokenIDs: []int{4, 5}, BlockSize: 2},
		{Kind: KindRemoved, Hashes: []uint64{1}, Medium: "GPU"},
		{Kind: KindCleared},
	}}
	p, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Fatalf("round trip (-in +out):\n%s", d)
	}
}

// A later vLLM's batch: data_parallel_rank on the batch, bytes hashes
// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0), lora_name, extra_keys and
// group_idx on BlockStored, group_idx on BlockRemoved, and an event kind
// this version does not know.
func TestDecodeLaterVLLMBatch(t *testing.T) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	h := bytes.Repeat([]byte{0xaa}, 24)
	h = append(h, 0, 0, 0, 0, 0, 0, 1, 2)
	for _, v := range []any{
		[]any{1.5, []any{
			[]any{"BlockStored", []any{h}, nil, []int{7, 8}, 2, nil, "GPU", nil, nil, 1},
			[]any{"BlockRemoved", []any{uint64(77)}, "GPU", 1},
			[]any{"BlockTransferred", 1, 2},
			[]any{"AllBlocksCleared"},
		}, 0},
	} {
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := DecodeBatch(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Batch{TS: 1.5, Events: []Event{
		{Kind: KindStored, Hashes: []uint64{0x0102}, TokenIDs: []int{7, 8}, BlockSize: 2, Medium: "GPU", GroupIdx: 1},
		{Kind: KindRemoved, Hashes: []uint64{77}, Medium: "GPU", GroupIdx: 1},
		{Kind: KindCleared},
	}}
	if d := cmp.Diff(want, b); d != "" {
		t.Fatalf("decoded (-want +got):\n%s", d)
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, p := range [][]byte{nil, {0x91, 0x01}, {0x92, 0xcb}} {
		if _, err := DecodeBatch(p); err == nil {
			t.Errorf("%x decoded", p)
		}
	}
}

// vLLM after vllm-project/vllm#42892: each event a tagged map, fields
// named (any order: Go maps encode in random order), defaults left out,
// fields this version does not read (event_version, extra_keys,
// kv_cache_spec_kind, locality) and a kind it does not know.
func TestDecodeMapEvents(t *testing.T) {
	parent := uint64(1<<63 + 1)
	events := []any{
		map[string]any{"type": "BlockStored", "block_hashes": []uint64{1 << 63, 2}, "parent_block_hash": parent,
			"token_ids": []int{1, 2, 3, 4}, "block_size": 2, "lora_id": nil, "medium": "GPU", "lora_name": nil,
			"extra_keys": []any{nil, nil}, "group_idx": 1, "kv_cache_spec_kind": "full_attention", "locality": "LOCAL",
			"a_later_field_whose_name_is_over_32_bytes": 1},
		map[string]any{"type": "BlockStored", "block_hashes": []uint64{3}, "parent_block_hash": nil,
			"token_ids": []int{5, 6}, "block_size": 2, "lora_id": nil, "medium": nil, "lora_name": nil},
		map[string]any{"type": "BlockRemoved", "block_hashes": []uint64{2}, "medium": "GPU", "ownership": "x"},
		map[string]any{"type": "BlockTransferred", "block_hashes": []uint64{9}},
		map[string]any{"type": "AllBlocksCleared"},
	}
	want := Batch{TS: 2.5, DPRank: 3, Events: []Event{
		{Kind: KindStored, Hashes: []uint64{1 << 63, 2}, Parent: &parent, TokenIDs: []int{1, 2, 3, 4}, BlockSize: 2, Medium: "GPU", GroupIdx: 1},
		{Kind: KindStored, Hashes: []uint64{3}, TokenIDs: []int{5, 6}, BlockSize: 2},
		{Kind: KindRemoved, Hashes: []uint64{2}, Medium: "GPU"},
		{Kind: KindCleared},
	}}
	for name, v := range map[string]any{
		"array batch": []any{2.5, events, 3},
		// vllm/distributed/kv_events.py at 0181ea31: EventBatch without array_like
		"map batch": map[string]any{"ts": 2.5, "events": events, "data_parallel_rank": 3},
	} {
		p, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeBatch(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(want, b); d != "" {
			t.Errorf("%s decoded (-want +got):\n%s", name, d)
		}
	}
}

func TestDecodeRefusesIncompleteMapEvents(t *testing.T) {
	for _, ev := range []map[string]any{
		{"block_hashes": []uint64{1}},
		{"type": "BlockStored", "block_hashes": []uint64{1}, "block_size": 2},
		{"type": "BlockStored", "token_ids": []int{1, 2}, "block_size": 2},
		{"type": "BlockRemoved", "medium": "GPU"},
		{"type": "BlockRemoved", "block_hashes": "not a list"},
	} {
		p, err := msgpack.Marshal([]any{1.0, []any{ev}, 0})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := DecodeBatch(p); err == nil {
			t.Errorf("%v decoded as %+v", ev, b)
		}
	}
}

// Encode writes what the current vLLM writes: [ts, events, rank] with
// each event a map keyed by vLLM's field names.
func TestEncodeIsVLLMsMapForm(t *testing.T) {
	p, err := Batch{TS: 1, DPRank: 2, Events: []Event{
		{Kind: KindStored, Hashes: []uint64{7}, TokenIDs: []int{1, 2}, BlockSize: 2, Medium: "GPU"},
		{Kind: KindRemoved, Hashes: []uint64{7}},
		{Kind: KindCleared},
	}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := msgpack.Unmarshal(p, &got); err != nil {
		t.Fatal(err)
	}
	want := []any{1.0, []any{
		map[string]any{"type": "BlockStored", "block_hashes": []any{int8(7)}, "parent_block_hash": nil,
			"token_ids": []any{int8(1), int8(2)}, "block_size": int8(2), "lora_id": nil, "medium": "GPU", "lora_name": nil, "group_idx": int8(0)},
		map[string]any{"type": "BlockRemoved", "block_hashes": []any{int8(7)}, "medium": nil, "group_idx": int8(0)},
		map[string]any{"type": "AllBlocksCleared"},
	}, int8(2)}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("encoded (-want +got):\n%s", d)
	}
}
