package artifact_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact/fixture"
)

func write(t testing.TB, dir string, spec fixture.Spec) {
	t.Helper()
	if _, err := fixture.Write(dir, spec); err != nil {
		t.Fatal(err)
	}
}

func TestReadHeadersSingleFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, fixture.Build(fixture.Llama31_8B(), 1))
	h := fixture.MustHeaders(t, dir)
	if len(h.Files) != 1 || h.Files[0] != artifact.SingleFile {
		t.Fatalf("files %v", h.Files)
	}
	if got, want := h.TotalBytes(), int64(8_030_261_248*2); got != want {
		t.Errorf("total %d want %d", got, want)
	}
	if len(h.Tensors) != 291 {
		t.Errorf("%d tensors, want 291 (32 layers × 9 + embed, norm, lm_head)", len(h.Tensors))
	}
	for i := 1; i < len(h.Tensors); i++ {
		if h.Tensors[i-1].Name >= h.Tensors[i].Name {
			t.Fatalf("tensors not sorted at %d", i)
		}
	}
	if h.Metadata[artifact.SingleFile]["format"] != "pt" {
		t.Errorf("metadata %v", h.Metadata)
	}
	if len(h.Warnings) != 0 || h.IndexTotalSize != nil {
		t.Errorf("warnings %v total %v", h.Warnings, h.IndexTotalSize)
	}
}

func TestReadHeadersSharded(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, fixture.Build(fixture.Llama31_70B(), 30))
	h := fixture.MustHeaders(t, dir)
	if len(h.Files) != 30 || h.TotalBytes() != 70_553_706_496*2 {
		t.Fatalf("files %d total %d", len(h.Files), h.TotalBytes())
	}
	if h.IndexTotalSize == nil || *h.IndexTotalSize != h.TotalBytes() || len(h.Warnings) != 0 {
		t.Errorf("index total %v warnings %v", h.IndexTotalSize, h.Warnings)
	}
	for _, ten := range h.Tensors {
		if ten.Name == "lm_head.weight" && ten.File != "model-00030-of-00030.safetensors" {
			t.Errorf("lm_head in %s", ten.File)
		}
	}
}

// vLLM's default loader takes every *.safetensors file when there is no
// index (weight_utils.filter_duplicate_safetensors_files returns the glob
// unchanged), so the reader does too.
func TestReadHeadersWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	spec := fixture.Build(fixture.Llama31_8B(), 3)
	write(t, dir, spec)
	if err := os.Remove(filepath.Join(dir, artifact.IndexFile)); err != nil {
		t.Fatal(err)
	}
	h := fixture.MustHeaders(t, dir)
	if len(h.Files) != 3 || h.TotalBytes() != 8_030_261_248*2 {
		t.Fatalf("files %v total %d", h.Files, h.TotalBytes())
	}
}

// With an index, a stray consolidated file beside the shards is not read
// (Mistral repositories ship both).
func TestIndexSelectsShards(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, fixture.Build(fixture.Llama31_8B(), 2))
	if _, err := fixture.WriteFile(filepath.Join(dir, "consolidated.safetensors"), []fixture.Tensor{{Name: "tok_embeddings.weight", DType: "BF16", Shape: []int64{8, 8}}}, nil); err != nil {
		t.Fatal(err)
	}
	h := fixture.MustHeaders(t, dir)
	if len(h.Files) != 2 {
		t.Fatalf("files %v", h.Files)
	}
}

func TestIndexTotalSizeMismatchIsWarning(t *testing.T) {
	dir := t.TempDir()
	spec := fixture.Build(fixture.Llama31_8B(), 2)
	wrong := int64(12345)
	spec.IndexTotalSize = &wrong
	write(t, dir, spec)
	h := fixture.MustHeaders(t, dir)
	if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "total_size is 12345") {
		t.Fatalf("warnings %v", h.Warnings)
	}
	if h.TotalBytes() != 8_030_261_248*2 {
		t.Errorf("headers, not total_size, give the bytes")
	}
}

func TestUnknownDTypeKeptVerbatim(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, fixture.Spec{Tensors: []fixture.Tensor{
		{Name: "a", DType: "F3_E1M1", Shape: []int64{10, 10}, Bytes: 40},
		{Name: "b", DType: "F4", Shape: []int64{4096, 4096}},
		{Name: "c", DType: "F8_E8M0", Shape: []int64{}},
	}})
	h := fixture.MustHeaders(t, dir)
	byName := map[string]artifact.Tensor{}
	for _, ten := range h.Tensors {
		byName[ten.Name] = ten
	}
	if a := byName["a"]; a.DType != "F3_E1M1" || a.DType.Known() || a.Bytes != 40 {
		t.Errorf("unknown dtype tensor %+v", a)
	}
	if b := byName["b"]; b.Bytes != 4096*4096/2 || !b.DType.Known() {
		t.Errorf("F4 tensor %+v", b)
	}
	if c := byName["c"]; c.Bytes != 1 || len(c.Shape) != 0 {
		t.Errorf("scalar tensor %+v", c)
	}
}

func TestDTypeTable(t *testing.T) {
	want := map[artifact.DType]int{
		"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
		"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
		"I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
	}
	for d, b := range want {
		if got, ok := d.Bits(); !ok || got != b {
			t.Errorf("%s: %d %v, want %d", d, got, ok, b)
		}
	}
	if len(artifact.KnownDTypes()) != len(want) {
		t.Errorf("table has %d dtypes, test knows %d", len(artifact.KnownDTypes()), len(want))
	}
	if _, st := artifact.SizeOf("F6_E2M3", []int64{3}); st != artifact.SizeNotByteAlign {
		t.Errorf("3 × 6 bits = 18 bits must be refused, got %s", st)
	}
	if n, st := artifact.SizeOf("F6_E2M3", []int64{4}); st != artifact.SizeOK || n != 3 {
		t.Errorf("4 × 6 bits = 3 bytes, got %d %s", n, st)
	}
	if _, st := artifact.SizeOf("NF4", []int64{4}); st != artifact.SizeUnknownDType {
		t.Errorf("NF4 is not a safetensors dtype, got %s", st)
	}
}

const okTensor = `"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}`

// raw writes a file with the given header text and data size.
func raw(t *testing.T, dir, name, header string, data int64) {
	t.Helper()
	if err := fixture.WriteRaw(filepath.Join(dir, name), []byte(header), 8+int64(len(header))+data); err != nil {
		t.Fatal(err)
	}
}

func TestMalformedHeaders(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		file  string // named in the error
		want  string
	}{
		{"truncated length", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte{1, 2, 3}, 0o644)
		}, "model.safetensors", "truncated: 3 bytes"},
		{"length beyond file", func(t *testing.T, dir string) {
			fixture.WriteRaw(filepath.Join(dir, "model.safetensors"), []byte("{}"), 0)
			f, _ := os.OpenFile(filepath.Join(dir, "model.safetensors"), os.O_WRONLY, 0)
			f.Write([]byte{0, 1, 0, 0, 0, 0, 0, 0}) // claims 256 bytes
			f.Close()
		}, "model.safetensors", "header length 256 runs past the end of the file (10 bytes)"},
		{"absurd length", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			fixture.WriteRaw(p, []byte("{}"), 300_000_000)
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.Write([]byte{0, 0, 0, 16, 0, 0, 0, 0}) // 268,435,456
			f.Close()
		}, "model.safetensors", "exceeds the 100000000-byte limit"},
		{"not json", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{'w': 1}`, 0)
		}, "model.safetensors", "header is not valid JSON at byte"},
		{"not an object", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `[1,2]   `, 0)
		}, "model.safetensors", "does not start with '{'"},
		{"trailing garbage", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", "{"+okTensor+"}x", 8)
		}, "model.safetensors", "unexpected content after the JSON value"},
		{"duplicate tensor", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", "{"+okTensor+","+okTensor+"}", 8)
		}, "model.safetensors", `duplicate key "w"`},
		{"duplicate field", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","dtype":"F32","shape":[2,2],"data_offsets":[0,8]}}`, 8)
		}, "model.safetensors", `duplicate key "dtype"`},
		{"offsets not ints", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,"8"]}}`, 8)
		}, "model.safetensors", `tensor "w": data_offsets must hold non-negative integers`},
		{"offsets fraction", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8.0]}}`, 8)
		}, "model.safetensors", "found a fraction or exponent"},
		{"offsets negative", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[-1,8]}}`, 8)
		}, "model.safetensors", "data_offsets must hold non-negative integers"},
		{"three offsets", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,4,8]}}`, 8)
		}, "model.safetensors", "data_offsets has 3 values, want [begin, end]"},
		{"missing offsets", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2]}}`, 8)
		}, "model.safetensors", `tensor "w": no data_offsets`},
		{"entry not object", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":[0,8]}`, 8)
		}, "model.safetensors", `tensor "w": header entry is not an object`},
		{"end before begin", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[8,0]}}`, 8)
		}, "model.safetensors", "end before they begin"},
		{"outside data", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}`, 4)
		}, "model.safetensors", "run past the data section (4 bytes)"},
		{"overlap", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[4,12]}}`, 12)
		}, "model.safetensors", `tensor "b": data_offsets [4, 12] overlap tensor "a"`},
		{"gap", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}}`, 24)
		}, "model.safetensors", "8-byte gap"},
		{"trailing data", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", "{"+okTensor+"}", 16)
		}, "model.safetensors", "holds 16 data bytes but the tensors cover 8"},
		{"shape size mismatch", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,8]}}`, 8)
		}, "model.safetensors", "shape [4, 4] × BF16 is 32 bytes but data_offsets [0, 8] hold 8"},
		{"sub-byte unaligned", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2)
		}, "model.safetensors", "does not fill whole bytes"},
		{"metadata not string", func(t *testing.T, dir string) {
			raw(t, dir, "model.safetensors", `{"__metadata__":{"format":1},`+okTensor+`}`, 8)
		}, "model.safetensors", `__metadata__ value of "format" is not a string`},
		{"no files", func(t *testing.T, dir string) {}, "", "no model.safetensors.index.json and no *.safetensors files"},
		{"index tensor missing from shard", func(t *testing.T, dir string) {
			raw(t, dir, "s1.safetensors", "{"+okTensor+"}", 8)
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"w":"s1.safetensors","v":"s1.safetensors"}}`), 0o644)
		}, "s1.safetensors", `tensor "v": listed in model.safetensors.index.json but not in this shard (1 such tensors)`},
		{"shard tensor missing from index", func(t *testing.T, dir string) {
			raw(t, dir, "s1.safetensors", `{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]}}`, 16)
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"a":"s1.safetensors"}}`), 0o644)
		}, "s1.safetensors", `tensor "b": in the shard but not in model.safetensors.index.json`},
		{"index wrong shard", func(t *testing.T, dir string) {
			raw(t, dir, "s1.safetensors", "{"+okTensor+"}", 8)
			raw(t, dir, "s2.safetensors", `{"v":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}`, 8)
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"w":"s2.safetensors","v":"s1.safetensors"}}`), 0o644)
		}, "s2.safetensors", `tensor "v": model.safetensors.index.json places it in s1.safetensors`},
		{"index shard missing", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"w":"s9.safetensors"}}`), 0o644)
		}, "s9.safetensors", "cannot open: no such file or directory"},
		{"index escapes dir", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"w":"../x.safetensors"}}`), 0o644)
		}, "model.safetensors.index.json", "not a plain relative path"},
		{"index duplicate key", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":{"w":"a.safetensors","w":"b.safetensors"}}`), 0o644)
		}, "model.safetensors.index.json", `duplicate key "w"`},
		{"index not json", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, artifact.IndexFile), []byte(`{"weight_map":`), 0o644)
		}, "model.safetensors.index.json", "not valid JSON"},
		{"tensor in two files", func(t *testing.T, dir string) {
			raw(t, dir, "a.safetensors", "{"+okTensor+"}", 8)
			raw(t, dir, "b.safetensors", "{"+okTensor+"}", 8)
		}, "b.safetensors", "also stored in a.safetensors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			_, err := artifact.ReadHeaders(dir)
			if err == nil {
				t.Fatal("accepted")
			}
			if !artifact.IsHeaderError(err) {
				t.Fatalf("%T is not a *HeaderError: %v", err, err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error is not one line: %q", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			if c.file != "" && !strings.HasPrefix(msg, "safetensors "+c.file+":") {
				t.Errorf("error %q does not name file %s", msg, c.file)
			}
		})
	}
}

// BenchmarkReadHeaders reads a 30-shard Llama-3.1-405B-shaped checkpoint
// (1,137 tensors, 811 GB claimed, sparse on disk) and a 16-shard
// Qwen3-30B-A3B (MoE: many small expert tensors).
func BenchmarkReadHeaders(b *testing.B) {
	for _, c := range []struct {
		name   string
		model  fixture.Model
		shards int
	}{
		{"405B", fixture.Llama31_405B(), 30},
		{"Qwen3MoE", fixture.Qwen3_30B_A3B(), 16},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			write(b, dir, fixture.Build(c.model, c.shards))
			b.ResetTimer()
			for b.Loop() {
				if _, err := artifact.ReadHeaders(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
