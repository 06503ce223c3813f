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
