package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/valyala/fastjson"
)

// Brief is the part of a row a scorer reads, decoded without building
// the whole row: narwhal report reads millions of rows this way (the
// Reader's full decode and validation cost several times more). Nullable
// numbers are NaN when null; byte slices are valid only until the
// callback returns.
type Brief struct {
	Kind    Kind
	Run     []byte
	Started []byte // meta rows

	// Request rows.
	ClientRID             []byte // nil when null
	Arrived               float64
	Terminal, Reason      []byte
	TTFT, TPOT, FirstByte float64
	DurationS             float64
	OutputLen, WantedLen  int // -1 when null
	PrefillIID, DecodeIID []byte
	Crossed, HasError     bool
	Status                int // 0 when null
	EventName             []byte
	At                    float64 // event rows
	Applied               bool    // controller_decision
	Prefill, Decode       int     // controller_decision split
	FlipIID, FlipTo       []byte  // controller_decision flip

	schemaOK, versionOK bool
}

// ScanBriefs calls fn for every row of the journal at path, every file of
// a rotated set in order. A torn final line ends the scan with an error
// that wraps ErrTruncated; a line that is not a journal row is an error
// naming its file and line.
func ScanBriefs(path string, fn func(*Brief) error) error {
	files, err := SetFiles(path)
	if err != nil {
		return err
	}
	var p fastjson.Parser
	for _, name := range files {
		if err := scanBriefFile(name, &p, fn); err != nil {
			return err
		}
	}
	return nil
}

func scanBriefFile(name string, p *fastjson.Parser, fn func(*Brief) error) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("read journal %s: %w", name, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var b Brief
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(raw)) > 0 {
				return fmt.Errorf("%s:%d: %w (%d bytes without a newline)", name, line, ErrTruncated, len(raw))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		v, perr := p.ParseBytes(raw)
		if perr == nil {
			perr = b.fill(v)
		}
		if perr != nil {
			return fmt.Errorf("%s:%d: %v", name, line, perr)
		}
		if err := fn(&b); err != nil {
			return err
		}
	}
}

// readLine returns one line without its newline; a line longer than the
// buffer is assembled (rows are ~1 KB, the buffer 1 MB).
func readLine(br *bufio.Reader) ([]byte, error) {
	raw, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), raw...)
		for errors.Is(err, bufio.ErrBufferFull) {
			raw, err = br.ReadSlice('\n')
			long = append(long, raw...)
		}
		raw = long
	}
	if err != nil {
		return raw, err
	}
	return raw[:len(raw)-1], nil
}

// fill decodes v into b, resetting every field first.
func (b *Brief) fill(v *fastjson.Value) error {
	*b = Brief{TTFT: math.NaN(), TPOT: math.NaN(), FirstByte: math.NaN(), OutputLen: -1, WantedLen: -1}
	o, err := v.Object()
	if err != nil {
		return fmt.Errorf("not a JSON object")
	}
	if m := o.Get("meta"); m != nil {
		if err := checkVersion(strPtr(m.GetStringBytes("schema")), intPtr(m, "schema_version")); err != nil {
			return fmt.Errorf("meta row: %w", err)
		}
		b.Kind, b.Started = KindMeta, m.GetStringBytes("started")
		return nil
	}
	o.Visit(b.visit)
	if !b.schemaOK || !b.versionOK {
		return checkVersion(strPtr(v.GetStringBytes("schema")), intPtr(v, "schema_version"))
	}
	switch {
	case b.EventName != nil && string(b.EventName) == EventRequestAdmitted:
		b.Kind = KindAdmission
	case b.EventName != nil:
		b.Kind = KindEvent
	case b.Terminal != nil:
		b.Kind = KindRequest
	default:
		return fmt.Errorf("row has neither \"rid\" (request row) nor \"event\" (event row)")
	}
	return nil
}

// visit reads one key of a row: the envelope, the request fields and the
// controller_decision fields.
func (b *Brief) visit(key []byte, v *fastjson.Value) {
	switch string(key) {
	case "schema":
		b.schemaOK = string(v.GetStringBytes()) == Schema
	case "schema_version":
		n, err := v.Int()
		b.versionOK = err == nil && n == SchemaVersion
	case "run":
		b.Run = v.GetStringBytes()
	case "client_rid":
		b.ClientRID = v.GetStringBytes()
	case "arrived":
		b.Arrived = v.GetFloat64()
	case "terminal":
		b.Terminal = v.GetStringBytes()
	case "reason":
		b.Reason = v.GetStringBytes()
	case "ttft_s":
		b.TTFT = num(v)
	case "tpot_s":
		b.TPOT = num(v)
	case "first_byte_s":
		b.FirstByte = num(v)
	case "duration_s":
		b.DurationS = v.GetFloat64()
	default:
		b.visitMore(key, v)
	}
}

func (b *Brief) visitMore(key []byte, v *fastjson.Value) {
	switch string(key) {
	case "output_len":
		b.OutputLen = intOr(v, -1)
	case "wanted_len":
		b.WantedLen = intOr(v, -1)
	case "prefill_iid":
		b.PrefillIID = v.GetStringBytes()
	case "decode_iid":
		b.DecodeIID = v.GetStringBytes()
	case "crossed":
		b.Crossed = v.GetBool()
	case "error":
		b.HasError = v.Type() != fastjson.TypeNull
	case "status":
		b.Status = v.GetInt()
	case "event":
		b.EventName = v.GetStringBytes()
	case "at":
		b.At = v.GetFloat64()
	case "applied":
		b.Applied = v.GetBool()
	case "prefill":
		b.Prefill = v.GetInt()
	case "decode":
		b.Decode = v.GetInt()
	case "iid":
		b.FlipIID = v.GetStringBytes()
	case "to":
		b.FlipTo = v.GetStringBytes()
	}
}

func num(v *fastjson.Value) float64 {
	if v.Type() != fastjson.TypeNumber {
		return math.NaN()
	}
	return v.GetFloat64()
}

func intOr(v *fastjson.Value, null int) int {
	if v.Type() != fastjson.TypeNumber {
		return null
	}
	return v.GetInt()
}

func strPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func intPtr(v *fastjson.Value, key string) *int {
	x := v.Get(key)
	if x == nil || x.Type() != fastjson.TypeNumber {
		return nil
	}
	n := x.GetInt()
	return &n
}
