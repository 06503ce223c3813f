package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Brief is the part of a row a scorer reads, decoded without building
// the whole row (a one-pass tokenizer that skips the fields it does not
// need): narwhal report reads millions of rows this way; the Reader's
// full decode and validation cost about ten times more. Nullable
// numbers are NaN when null; byte slices are valid only until the
// callback returns.
type Brief struct {
	Kind    Kind
	Run     []byte
	Started []byte // meta rows

	// Request rows.
	RID                   []byte
	ClientRID             []byte // nil when null
	InputLen              int
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
	FlipIID, FlipTo       []byte  // controller_decision flip; FlipIID is any event's iid
	// engine_lifecycle events: the action and, for process_excluded, the
	// process starts it names (NaN when absent).
	Action                       []byte
	PreviousStart, ObservedStart float64
}

// ScanBriefs calls fn for every row of the journal at path, every file of
// a rotated set in order, and returns the torn rows it skipped. A
// truncated final line ends the scan with an error that wraps
// ErrTruncated; a line that is whole JSON but not a journal row is an
// error naming its file and line.
func ScanBriefs(path string, fn func(*Brief) error) (Torn, error) {
	var torn Torn
	files, err := SetFiles(path)
	if err != nil {
		return torn, err
	}
	for _, name := range files {
		if err := scanBriefFile(name, &torn, fn); err != nil {
			return torn, err
		}
	}
	return torn, nil
}

func scanBriefFile(name string, torn *Torn, fn func(*Brief) error) error {
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
		skip, err := b.fillLine(raw, name, line, torn)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if err := fn(&b); err != nil {
			return err
		}
	}
}

// fillLine decodes one line of name into b. It says to skip a blank line
// and a torn row (counted in torn); another line that does not decode is
// an error naming name:line.
func (b *Brief) fillLine(raw []byte, name string, line int, torn *Torn) (bool, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true, nil
	}
	err := b.fill(raw)
	switch {
	case err == nil:
		return false, nil
	case isTorn(raw):
		torn.add(name, line)
		return true, nil
	}
	return false, fmt.Errorf("%s:%d: %v", name, line, err)
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

// fill decodes one line into b, resetting every field first.
func (b *Brief) fill(line []byte) error {
	*b = Brief{TTFT: math.NaN(), TPOT: math.NaN(), FirstByte: math.NaN(), OutputLen: -1, WantedLen: -1,
		PreviousStart: math.NaN(), ObservedStart: math.NaN()}
	s := scanner{b: line}
	var schema []byte
	version := -1
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "meta":
			b.Kind = KindMeta
			return b.meta(&s)
		case "schema":
			t, err := s.value()
			schema = t.bytes()
			return err
		case "schema_version":
			t, err := s.value()
			if n, ok := t.int(); ok {
				version = n
			}
			return err
		}
		t, err := s.value()
		if err == nil {
			b.visit(key, t)
		}
		return err
	})
	if err != nil || b.Kind == KindMeta {
		return err
	}
	if err := checkVersion(strPtr(schema), intPtr(version)); err != nil {
		return err
	}
	return b.classify()
}

// meta reads the meta row's body: its schema and version, and started.
func (b *Brief) meta(s *scanner) error {
	var schema []byte
	version := -1
	err := s.object(func(key []byte) error {
		t, err := s.value()
		switch string(key) {
		case "schema":
			schema = t.bytes()
		case "schema_version":
			if n, ok := t.int(); ok {
				version = n
			}
		case "started":
			b.Started = t.bytes()
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := checkVersion(strPtr(schema), intPtr(version)); err != nil {
		return fmt.Errorf("meta row: %w", err)
	}
	return nil
}

func (b *Brief) classify() error {
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
func (b *Brief) visit(key []byte, t token) {
	switch string(key) {
	case "run":
		b.Run = t.bytes()
	case "rid":
		b.RID = t.bytes()
	case "input_len":
		b.InputLen, _ = t.int()
	case "client_rid":
		b.ClientRID = t.bytes()
	case "arrived":
		b.Arrived, _ = t.float()
	case "terminal":
		b.Terminal = t.bytes()
	case "reason":
		b.Reason = t.bytes()
	case "ttft_s":
		b.TTFT = orNaN(t)
	case "tpot_s":
		b.TPOT = orNaN(t)
	case "first_byte_s":
		b.FirstByte = orNaN(t)
	case "duration_s":
		b.DurationS, _ = t.float()
	default:
		b.visitMore(key, t)
	}
}

func (b *Brief) visitMore(key []byte, t token) {
	switch string(key) {
	case "output_len":
		b.OutputLen = intOr(t, -1)
	case "wanted_len":
		b.WantedLen = intOr(t, -1)
	case "prefill_iid":
		b.PrefillIID = t.bytes()
	case "decode_iid":
		b.DecodeIID = t.bytes()
	case "crossed":
		b.Crossed = t.kind == 't'
	case "error":
		b.HasError = t.kind != 'z'
	case "status":
		b.Status = intOr(t, 0)
	case "event":
		b.EventName = t.bytes()
	case "at":
		b.At, _ = t.float()
	case "applied":
		b.Applied = t.kind == 't'
	case "prefill":
		b.Prefill = intOr(t, 0)
	case "decode":
		b.Decode = intOr(t, 0)
	case "iid":
		b.FlipIID = t.bytes()
	case "to":
		b.FlipTo = t.bytes()
	case "action":
		b.Action = t.bytes()
	case "previous_process_start":
		b.PreviousStart = orNaN(t)
	case "observed_process_start":
		b.ObservedStart = orNaN(t)
	}
}

func orNaN(t token) float64 {
	if v, ok := t.float(); ok {
		return v
	}
	return math.NaN()
}

func intOr(t token, null int) int {
	if n, ok := t.int(); ok {
		return n
	}
	return null
}

func strPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func intPtr(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}
