package canon

import (
	"math"
	"testing"
	"time"
)

type inner struct {
	Z string `json:"z"`
	A *int   `json:"a"`
}

type embedded struct {
	Emb string `json:"emb"`
}

type sample struct {
	embedded
	Name    string            `json:"name"`
	Tags    []string          `json:"tags"`
	Labels  map[string]string `json:"labels"`
	Inner   inner             `json:"inner"`
	Ptr     *inner            `json:"ptr"`
	Float   float64           `json:"float"`
	Skipped string            `json:"-"`
	hidden  string
	NoTag   bool
}

func TestMarshalRecordRules(t *testing.T) {
	one := 1
	got, err := Marshal(sample{
		embedded: embedded{Emb: "e"},
		Name:     "</x>",
		Inner:    inner{Z: "z", A: &one},
		Float:    math.Copysign(0, -1),
		Skipped:  "s",
		hidden:   "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	// nil slice -> [], nil map -> {}, nil pointer -> null, -0 -> 0, no HTML
	// escaping, keys sorted, untagged embedded struct flattened.
	want := `{"NoTag":false,"emb":"e","float":0,"inner":{"a":1,"z":"z"},"labels":{},"name":"</x>","ptr":null,"tags":[]}`
	if string(got) != want {
		t.Fatalf("Marshal\n got %s\nwant %s", got, want)
	}
}

func TestMarshalSameBytesForNilAndEmpty(t *testing.T) {
	a, _ := Marshal(sample{})
	b, _ := Marshal(sample{Tags: []string{}, Labels: map[string]string{}})
	if string(a) != string(b) {
		t.Fatalf("nil and empty collections differ:\n%s\n%s", a, b)
	}
}

func TestMarshalRefusals(t *testing.T) {
	type withOmit struct {
		ID string `json:"id,omitempty"`
	}
	type withOmitZero struct {
		ID string `json:"id,omitzero"`
	}
	type withString struct {
		N int `json:"n,string"`
	}
	cases := []struct {
		name string
		v    any
		code Code
	}{
		{"omitempty", withOmit{}, CodeUnsupportedValue},
		{"omitzero nested", map[string]any{"x": []any{withOmitZero{}}}, CodeUnsupportedValue},
		{"string option", withString{}, CodeUnsupportedValue},
		{"NaN", math.NaN(), CodeNumberRange},
		{"Inf", math.Inf(-1), CodeNumberRange},
		{"int beyond 2^53", int64(1<<53 + 1), CodeIntegerRange},
		{"negative int beyond 2^53", int64(-(1<<53 + 1)), CodeIntegerRange},
		{"uint beyond 2^53", uint64(1 << 60), CodeIntegerRange},
		{"invalid utf8", "\xff", CodeInvalidUTF8},
		{"invalid utf8 key", map[string]int{"\xff": 1}, CodeInvalidUTF8},
		{"float32", float32(0.1), CodeUnsupportedValue},
		{"bytes", []byte("x"), CodeUnsupportedValue},
		{"int keys", map[int]int{1: 1}, CodeUnsupportedValue},
		{"func", func() {}, CodeUnsupportedValue},
	}
	for _, c := range cases {
		if _, err := Marshal(c.v); CodeOf(err) != c.code {
			t.Errorf("%s: Marshal err = %v, want code %s", c.name, err, c.code)
		}
	}
}

func TestMarshalErrorNamesThePath(t *testing.T) {
	_, err := Marshal(map[string]any{"records": []any{map[string]any{"n": math.NaN()}}})
	if err == nil || err.(*Error).Path != "$.records[0].n" {
		t.Fatalf("err = %v, want path $.records[0].n", err)
	}
}

func TestMarshalUsesMarshalJSON(t *testing.T) {
	ts := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	got, err := Marshal(map[string]any{"t": ts, "p": &ts})
	if err != nil || string(got) != `{"p":"2026-09-10T12:00:00Z","t":"2026-09-10T12:00:00Z"}` {
		t.Fatalf("Marshal = %s, %v", got, err)
	}
}

func TestMarshalDigestMatchesDigest(t *testing.T) {
	b, d, err := MarshalDigest(map[string]int{"b": 2, "a": 1})
	if err != nil || string(b) != `{"a":1,"b":2}` || d != Digest(b) {
		t.Fatalf("MarshalDigest = %s %s %v", b, d, err)
	}
}
