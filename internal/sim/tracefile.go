package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Trace files are JSON Lines. The first line is a header,
// {"schema":"narwhal.sim-trace","schema_version":1,"duration_s":D}, and
// every other line one request, {"at":S,"input_len":N,"output_len":M},
// in nondecreasing at. A file without the header is read too (a trace
// recorded elsewhere); its duration is then the last arrival time.
const (
	TraceSchema        = "narwhal.sim-trace"
	TraceSchemaVersion = 1
)

type traceHeader struct {
	Schema        string  `json:"schema"`
	SchemaVersion int     `json:"schema_version"`
	DurationS     float64 `json:"duration_s"`
}

// WriteTrace writes t as a trace file.
func WriteTrace(w io.Writer, t Trace) error {
	bw := bufio.NewWriter(w)
	h, _ := json.Marshal(traceHeader{Schema: TraceSchema, SchemaVersion: TraceSchemaVersion, DurationS: t.DurationS})
	bw.Write(h)
	bw.WriteByte('\n')
	for _, a := range t.Arrivals {
		b, _ := json.Marshal(a)
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ReadTrace reads a trace file; name prefixes errors with the line that is
// wrong.
func ReadTrace(r io.Reader, name string) (Trace, error) {
	var t Trace
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line, header := 0, false
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if line == 1 && bytes.Contains(b, []byte(`"schema"`)) {
			d, err := readHeader(b)
			if err != nil {
				return Trace{}, fmt.Errorf("%s:%d: %w", name, line, err)
			}
			t.DurationS, header = d, true
			continue
		}
		a, err := readRow(b, t.Arrivals)
		if err != nil {
			return Trace{}, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		t.Arrivals = append(t.Arrivals, a)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(t.Arrivals) == 0 {
		return Trace{}, fmt.Errorf("%s: no requests: a trace needs at least one {\"at\",\"input_len\",\"output_len\"} row", name)
	}
	last := t.Arrivals[len(t.Arrivals)-1].At
	if !header {
		t.DurationS = last
	}
	if t.DurationS < last {
		return Trace{}, fmt.Errorf("%s: duration_s %s ends before the last arrival at %s: raise it", name, fmtS(t.DurationS), fmtS(last))
	}
	if t.DurationS <= 0 {
		return Trace{}, fmt.Errorf("%s: every request arrives at 0 s: a trace needs a positive duration", name)
	}
	return t, nil
}

func readHeader(b []byte) (float64, error) {
	var h traceHeader
	if err := strict(b, &h); err != nil {
		return 0, err
	}
	if h.Schema != TraceSchema {
		return 0, fmt.Errorf("schema %q is not %s", h.Schema, TraceSchema)
	}
	if h.SchemaVersion != TraceSchemaVersion {
		return 0, fmt.Errorf("%s version %d is not supported: this build reads version %d", TraceSchema, h.SchemaVersion, TraceSchemaVersion)
	}
	if !(h.DurationS > 0) || math.IsInf(h.DurationS, 0) {
		return 0, fmt.Errorf("duration_s must be a positive number of seconds")
	}
	return h.DurationS, nil
}

func readRow(b []byte, prev []Arrival) (Arrival, error) {
	var raw struct {
		At        *float64 `json:"at"`
		InputLen  *int     `json:"input_len"`
		OutputLen *int     `json:"output_len"`
	}
	if err := strict(b, &raw); err != nil {
		return Arrival{}, err
	}
	if raw.At == nil || raw.InputLen == nil || raw.OutputLen == nil {
		return Arrival{}, fmt.Errorf("a request row needs at, input_len and output_len")
	}
	a := Arrival{At: *raw.At, InputLen: *raw.InputLen, OutputLen: *raw.OutputLen}
	switch {
	case !(a.At >= 0) || math.IsInf(a.At, 0):
		return a, fmt.Errorf("at must be a nonnegative number of seconds")
	case a.InputLen < 1 || a.OutputLen < 1:
		return a, fmt.Errorf("input_len and output_len must be at least 1")
	case len(prev) > 0 && a.At < prev[len(prev)-1].At:
		return a, fmt.Errorf("at %s is before the previous request's %s: sort the trace by at", fmtS(a.At), fmtS(prev[len(prev)-1].At))
	}
	return a, nil
}

// strict decodes one JSON object, rejecting unknown fields (a typo would
// otherwise read as a missing value) and trailing data.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not a valid row: %v", err)
	}
	if d.More() {
		return fmt.Errorf("not a valid row: more than one JSON value on the line")
	}
	return nil
}

func fmtS(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + " s" }
