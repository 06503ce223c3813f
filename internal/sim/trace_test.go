package sim

import (
	"bytes"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite examples/traces from the generator")

func TestGenerateIsSeeded(t *testing.T) {
	segs := MovingSegments(60)
	a := mustGenerate(t, segs, 4, 7)
	b := mustGenerate(t, segs, 4, 7)
	c := mustGenerate(t, segs, 4, 8)
	var ab, bb, cb bytes.Buffer
	for _, x := range []struct {
		t Trace
		w *bytes.Buffer
	}{{a, &ab}, {b, &bb}, {c, &cb}} {
		if err := WriteTrace(x.w, x.t); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(ab.Bytes(), bb.Bytes()) {
		t.Error("the same seed gave two different traces")
	}
	if bytes.Equal(ab.Bytes(), cb.Bytes()) {
		t.Error("seeds 7 and 8 gave the same trace")
	}
}

// Each segment draws from its own mix: the prefill-heavy phase has the
// longest prompts and shortest outputs, the decode-heavy one the reverse.
func TestGenerateSegmentsMoveTheMix(t *testing.T) {
	segs := MovingSegments(300)
	tr := mustGenerate(t, segs, 10, 1)
	if got := tr.Rate(); math.Abs(got-10) > 0.5 {
		t.Errorf("realised rate %.2f req/s, want about 10", got)
	}
	type mean struct{ in, out, n float64 }
	var m [3]mean
	for i, a := range tr.Arrivals {
		s := int(a.At / 300)
		if i > 0 && a.At < tr.Arrivals[i-1].At {
			t.Fatalf("arrival %d at %v goes back in time", i, a.At)
		}
		if a.InputLen < 1 || a.InputLen > segs[s].InputMax || a.OutputLen < 1 || a.OutputLen > segs[s].OutputMax {
			t.Fatalf("arrival %d has lengths %d/%d outside segment %s's bounds", i, a.InputLen, a.OutputLen, segs[s].Name)
		}
		m[s].in += float64(a.InputLen)
		m[s].out += float64(a.OutputLen)
		m[s].n++
	}
	for s := range m {
		in, out := m[s].in/m[s].n, m[s].out/m[s].n
		if math.Abs(in-segs[s].InputMean) > 0.1*segs[s].InputMean || math.Abs(out-segs[s].OutputMean) > 0.1*segs[s].OutputMean {
			t.Errorf("segment %s: mean lengths %.0f/%.0f, want about %.0f/%.0f", segs[s].Name, in, out, segs[s].InputMean, segs[s].OutputMean)
		}
	}
}

func TestGenerateRejects(t *testing.T) {
	good := MovingSegments(10)[:1]
	bad := good[0]
	bad.DurationS = 0
	cases := []struct {
		name string
		segs []Segment
		rate float64
	}{
		{"zero rate", good, 0},
		{"infinite rate", good, math.Inf(1)},
		{"no segments", nil, 1},
		{"empty segment", []Segment{bad}, 1},
	}
	for _, c := range cases {
		if _, err := Generate(c.segs, c.rate, 1); err == nil {
			t.Errorf("%s: want an error", c.name)
		}
	}
}

func TestScaledKeepsOrderAndLengths(t *testing.T) {
	tr := mustGenerate(t, MovingSegments(30), 2, 3)
	s := tr.Scaled(6)
	if math.Abs(s.Rate()-6) > 1e-9 || len(s.Arrivals) != len(tr.Arrivals) {
		t.Fatalf("scaled to %v req/s with %d requests, want 6 with %d", s.Rate(), len(s.Arrivals), len(tr.Arrivals))
	}
	f := tr.Rate() / 6
	for i := range s.Arrivals {
		a, b := tr.Arrivals[i], s.Arrivals[i]
		if a.InputLen != b.InputLen || a.OutputLen != b.OutputLen || math.Abs(b.At-a.At*f) > 1e-9 {
			t.Fatalf("arrival %d: %+v scaled to %+v", i, a, b)
		}
	}
	if tr.Arrivals[0].At == s.Arrivals[0].At {
		t.Error("scaling changed nothing")
	}
}

func TestTraceRoundTrip(t *testing.T) {
	tr := mustGenerate(t, MovingSegments(20), 3, 5)
	var buf bytes.Buffer
	if err := WriteTrace(&buf, tr); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTrace(&buf, "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got.DurationS != tr.DurationS || len(got.Arrivals) != len(tr.Arrivals) {
		t.Fatalf("read %v s / %d requests, wrote %v s / %d", got.DurationS, len(got.Arrivals), tr.DurationS, len(tr.Arrivals))
	}
	for i := range got.Arrivals {
		if got.Arrivals[i] != tr.Arrivals[i] {
			t.Fatalf("row %d: read %+v, wrote %+v", i, got.Arrivals[i], tr.Arrivals[i])
		}
	}
}

func TestReadTraceWithoutHeader(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader("{\"at\":0,\"input_len\":10,\"output_len\":2}\n\n{\"at\":2.5,\"input_len\":20,\"output_len\":3}\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if tr.DurationS != 2.5 || len(tr.Arrivals) != 2 || tr.Arrivals[1] != (Arrival{At: 2.5, InputLen: 20, OutputLen: 3}) {
		t.Fatalf("got %+v", tr)
	}
}

func TestReadTraceErrors(t *testing.T) {
	const hdr = `{"schema":"narwhal.sim-trace","schema_version":1,"duration_s":10}` + "\n"
	cases := []struct{ name, in, want string }{
		{"empty", "", "t: no requests"},
		{"unknown field", `{"at":1,"input_len":1,"output_len":1,"outptu_len":3}`, `t:1: not a valid row: json: unknown field "outptu_len"`},
		{"missing field", `{"at":1,"input_len":1}`, "t:1: a request row needs at, input_len and output_len"},
		{"zero length", `{"at":1,"input_len":0,"output_len":1}`, "t:1: input_len and output_len must be at least 1"},
		{"negative time", `{"at":-1,"input_len":1,"output_len":1}`, "t:1: at must be a nonnegative"},
		{"out of order", "{\"at\":2,\"input_len\":1,\"output_len\":1}\n{\"at\":1,\"input_len\":1,\"output_len\":1}", "t:2: at 1 s is before the previous request's 2 s"},
		{"newer version", `{"schema":"narwhal.sim-trace","schema_version":2,"duration_s":1}`, "t:1: narwhal.sim-trace version 2 is not supported"},
		{"other schema", `{"schema":"narwhal.journal","schema_version":1,"duration_s":1}`, `t:1: schema "narwhal.journal" is not narwhal.sim-trace`},
		{"duration too short", hdr + `{"at":11,"input_len":1,"output_len":1}`, "t: duration_s 10 s ends before the last arrival at 11 s"},
		{"all at zero", `{"at":0,"input_len":1,"output_len":1}`, "t: every request arrives at 0 s"},
		{"two values", `{"at":0,"input_len":1,"output_len":1} {}`, "t:1: not a valid row: more than one JSON value"},
	}
	for _, c := range cases {
		_, err := ReadTrace(strings.NewReader(c.in), "t")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want prefix %q", c.name, err, c.want)
		}
	}
}

// The shipped example is the generator's output for its documented
// parameters; go test ./internal/sim -run Example -update rewrites it.
func TestExampleTrace(t *testing.T) {
	const path = "../../examples/traces/moving-small.jsonl"
	tr := mustGenerate(t, MovingSegments(20), 2, 1)
	var buf bytes.Buffer
	if err := WriteTrace(&buf, tr); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, buf.Bytes()) {
		t.Fatalf("%s is not Generate(MovingSegments(20), 2, 1): rerun with -update", path)
	}
	if _, err := ReadTrace(bytes.NewReader(b), path); err != nil {
		t.Fatal(err)
	}
}
