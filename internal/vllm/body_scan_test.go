package vllm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var bodySeeds = []string{
	`{"model":"m","prompt":"the quick brown fox","max_tokens":5,"stream":true}`,
	` { "model" : "m" , "messages" : [ {"role":"user","content":"<|im_start|> a & b >"} ] , "temperature" : 0.5 } `,
	`{"prompt":"line\u2028sep\u2029 and raw ` + "\u2028\u2029" + ` too","n":1}`,
	`{"prompt":"é ü \ud83d\ude00","stop":["\n","<eos>"],"logit_bias":{"50256":-100}}`,
	`{"a":1,"a":2}`,
	`{"k\u0065y":1}`,
	`{"<k>":true}`,
	`{"ünï":null}`,
	`{}`,
	`null`,
	`[]`,
	`{"a":1} {"b":2}`,
	`{"a":1,}`,
	`{"a":[1,2,{"b":[[[]]]}],"c":{"d":{"e":"f"}}}`,
	`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"a":-0.5e+10,"b":1E-3,"c":0}`,
	"{\"a\":\"tab\tinside\"}",
	`{"a":"\"quoted\" \\ back"}`,
	`{"a":01}`,
	"{\"a\":\"\xff\xfe\"}",
}

// TestSplitBodyAnswersLikeDecoding: every seed (the fuzz corpus's start)
// splits to what decoding gives, or is left to decoding.
func TestSplitBodyAnswersLikeDecoding(t *testing.T) {
	fast := 0
	for _, in := range bodySeeds {
		if checkBody(t, []byte(in)) {
			fast++
		}
	}
	if fast < 8 {
		t.Fatalf("the scanner answered %d of %d seeds; the common shapes should not fall back", fast, len(bodySeeds))
	}
}

// TestAppendBodyRefusesWhatMarshalWouldNot: a value that is not one JSON
// value, an empty one or a key needing escapes goes to encoding/json.
func TestAppendBodyRefusesWhatMarshalWouldNot(t *testing.T) {
	for _, b := range []Body{
		{"a": json.RawMessage(`{"x":`)},
		{"a": json.RawMessage(`1 2`)},
		{"a": json.RawMessage(``)},
		{"a": nil},
		{"a\"b": jsonOne},
		{"ü": jsonOne},
		{"<": jsonOne},
	} {
		if out, ok := appendBody(nil, b); ok {
			t.Errorf("appendBody(%v) = %q, want it left to encoding/json", b, out)
		}
	}
}

// checkBody holds the scanner paths to encoding/json for one input and
// reports whether the fast split answered.
func checkBody(t *testing.T, in []byte) bool {
	t.Helper()
	want, werr := decodeBody(in)
	got, gerr := ParseBody(in)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("ParseBody(%q) error %v, decoding %v", in, gerr, werr)
	}
	fast, ok := splitBody(in)
	if ok {
		if werr != nil {
			t.Fatalf("splitBody(%q) accepted what decoding refuses: %v", in, werr)
		}
		sameBody(t, in, fast, want)
	}
	if werr != nil {
		return ok
	}
	sameBody(t, in, got, want)
	extra := want.clone()
	extra["model"] = raw("m<&>\u2028")
	extra["kv_transfer_params"] = json.RawMessage(" {\n \"remote_engine_id\" : \"e\" } ")
	for _, b := range []Body{want, extra} {
		wantOut, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("json.Marshal(%q): %v", in, err)
		}
		if out := marshalBody(b); !bytes.Equal(out, wantOut) {
			t.Fatalf("marshalBody(%q) = %q, json.Marshal %q", in, out, wantOut)
		}
	}
	return ok
}

func sameBody(t *testing.T, in []byte, got, want Body) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("body %q: %d fields, decoding has %d", in, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("body %q field %q = %q, decoding %q", in, k, g, v)
		}
	}
}

// FuzzBody: the scanner's split and join agree with encoding/json on any
// input (go test -fuzz FuzzBody ./internal/vllm/).
func FuzzBody(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkBody(t, in) })
}

// BenchmarkBody is a routed request's body work: one split, a prefill and
// a decode body (go test -bench Body -benchmem ./internal/vllm/).
func BenchmarkBody(b *testing.B) {
	in := []byte(`{"model":"m","prompt":"The quick brown fox jumps over the lazy dog, again and again.","max_tokens":16,` +
		`"stream":true,"temperature":0.7,"top_p":0.95,"stop":["\n\n"]}`)
	kvp := json.RawMessage(`{"remote_engine_id":"e1","remote_block_ids":[1,2,3],"remote_host":"127.0.0.1","remote_port":5600}`)
	for _, c := range []struct {
		name  string
		parse func([]byte) (Body, error)
		join  func(Body) []byte
	}{
		{"scanner", ParseBody, marshalBody},
		{"encoding-json", decodeBody, func(b Body) []byte { return mustMarshal(b) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body, _ := c.parse(in)
				p := body.clone()
				p["max_tokens"] = jsonOne
				c.join(p)
				d := body.clone()
				d["kv_transfer_params"] = kvp
				c.join(d)
			}
		})
	}
}
