package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// ErrTruncated marks a final line without its newline: the writer stopped
// mid-row (a crash or a full disk). A scorer may report it and keep the
// rows before it.
var ErrTruncated = errors.New("truncated final line")

// Kind tells which row a Record holds.
type Kind int

// Row kinds.
const (
	KindMeta Kind = iota + 1
	KindRequest
	KindEvent
	// KindAdmission is an admission record (EventRequestAdmitted).
	KindAdmission
)

// Record is one parsed line. Exactly one of Meta, Request, Event,
// Admission is set, as Kind says. Run is empty for meta rows (they carry
// none).
type Record struct {
	Line      int
	Kind      Kind
	Run       string
	Meta      *Meta
	Request   *RequestRow
	Event     *Event
	Admission *Admission
}

// Reader iterates the rows of a journal. It skips torn rows and counts
// them (Torn).
type Reader struct {
	name string
	br   *bufio.Reader
	line int
	err  error
	torn Torn
}

// NewReader reads a journal from r. Errors name the file (r's Name()
// when it has one, as *os.File does, else "journal") and the 1-based line.
func NewReader(r io.Reader) *Reader {
	name := "journal"
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name()
	}
	return &Reader{name: name, br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next record, io.EOF after the last. A torn row is
// skipped and counted; any other error ends the iteration: later calls
// return it again.
func (r *Reader) Next() (Record, error) {
	for r.err == nil {
		raw, err := r.br.ReadBytes('\n')
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			r.err = io.EOF
			break
		}
		r.line++
		if err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("%s:%d: %w", r.name, r.line, err)
			break
		}
		if err != nil { // EOF with bytes: no trailing newline
			r.err = fmt.Errorf("%s:%d: %w (%d bytes without a newline; the writer stopped mid-row, the rows before it are whole)",
				r.name, r.line, ErrTruncated, len(raw))
			break
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		rec, perr := parseLine(raw)
		if perr != nil && isTorn(raw) {
			r.torn.add(r.name, r.line)
			continue
		}
		if perr != nil {
			r.err = fmt.Errorf("%s:%d: %w", r.name, r.line, perr)
			break
		}
		rec.Line = r.line
		return rec, nil
	}
	return Record{}, r.err
}

// Torn is what Next has skipped so far.
func (r *Reader) Torn() Torn { return r.torn }

// probe holds the keys that decide what a line is.
type probe struct {
	Meta          *Meta           `json:"meta"`
	Schema        *string         `json:"schema"`
	SchemaVersion *int            `json:"schema_version"`
	Run           string          `json:"run"`
	Event         *string         `json:"event"`
	RID           json.RawMessage `json:"rid"`
}

func parseLine(raw []byte) (Record, error) {
	var p probe
	if err := json.Unmarshal(raw, &p); err != nil {
		return Record{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if p.Meta != nil {
		if err := checkVersion(&p.Meta.Schema, &p.Meta.SchemaVersion); err != nil {
			return Record{}, fmt.Errorf("meta row: %w", err)
		}
		return Record{Kind: KindMeta, Meta: p.Meta}, nil
	}
	if err := checkVersion(p.Schema, p.SchemaVersion); err != nil {
		return Record{}, err
	}
	switch {
	case p.Event != nil && *p.Event == EventRequestAdmitted:
		var a admissionRow
		if err := json.Unmarshal(raw, &a); err != nil {
			return Record{}, fmt.Errorf("admission row: %v", err)
		}
		if a.RID == "" {
			return Record{}, fmt.Errorf("admission row without a rid")
		}
		return Record{Kind: KindAdmission, Run: p.Run, Admission: &a.Admission}, nil
	case p.Event != nil:
		ev, err := parseEvent(raw)
		return Record{Kind: KindEvent, Run: p.Run, Event: ev}, err
	case p.RID != nil:
		var row RequestRow
		if err := json.Unmarshal(raw, &row); err != nil {
			return Record{}, fmt.Errorf("request row: %v", err)
		}
		if err := row.Validate(); err != nil {
			return Record{}, err
		}
		return Record{Kind: KindRequest, Run: p.Run, Request: &row}, nil
	}
	return Record{}, fmt.Errorf("row has neither \"rid\" (request row) nor \"event\" (event row)")
}

func checkVersion(schema *string, version *int) error {
	switch {
	case schema == nil || version == nil:
		return fmt.Errorf("row lacks \"schema\" or \"schema_version\"; is this a narwhal journal?")
	case *schema != Schema:
		return fmt.Errorf("unknown schema %q (this build reads %s %d)", *schema, Schema, SchemaVersion)
	case *version != SchemaVersion:
		return fmt.Errorf("unknown schema_version %d (this build reads %s %d)", *version, Schema, SchemaVersion)
	}
	return nil
}

// parseEvent returns the event with every non-envelope key in Fields.
// Numbers decode as float64, as encoding/json does for any.
func parseEvent(raw []byte) (*Event, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("event row: %v", err)
	}
	name, _ := m["event"].(string)
	at, ok := m["at"].(float64)
	if name == "" || !ok {
		return nil, fmt.Errorf("event row needs a string \"event\" and a number \"at\"")
	}
	for _, k := range reservedKeys() {
		delete(m, k)
	}
	return &Event{Name: name, At: at, Fields: m}, nil
}

// Journal is a whole journal read into memory, rows in file order.
type Journal struct {
	Metas    []Meta
	Requests []Record
	Events   []Record
	// Admissions are the admission records (KindAdmission), apart from
	// Events so that event counts stay those of fleet events.
	Admissions []Record
	// Runs lists the run ids in order of first appearance.
	Runs []string
	// Torn counts the torn rows skipped.
	Torn Torn
}

// ReadAll reads every row of r, torn rows skipped and counted in Torn.
// On error it returns what it read before the bad line, so a scorer can choose to use the whole rows before a
// truncated tail (errors.Is(err, ErrTruncated)).
func ReadAll(r io.Reader) (*Journal, error) {
	j := &Journal{}
	seen := map[string]bool{}
	rd := NewReader(r)
	for {
		rec, err := rd.Next()
		j.Torn = rd.Torn()
		if errors.Is(err, io.EOF) {
			return j, nil
		}
		if err != nil {
			return j, err
		}
		if rec.Run != "" && !seen[rec.Run] {
			seen[rec.Run] = true
			j.Runs = append(j.Runs, rec.Run)
		}
		switch rec.Kind {
		case KindMeta:
			j.Metas = append(j.Metas, *rec.Meta)
		case KindRequest:
			j.Requests = append(j.Requests, rec)
		case KindEvent:
			j.Events = append(j.Events, rec)
		case KindAdmission:
			j.Admissions = append(j.Admissions, rec)
		}
	}
}

// ReadFile reads the journal at path.
func ReadFile(path string) (*Journal, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w; check the path (narwhal-serve --journal)", err)
	}
	defer f.Close()
	return ReadAll(f)
}

// Terminals counts terminal rows per rid. A request that reached
// admission must appear exactly once; tests assert every count is 1.
func Terminals(requests []Record) map[string]int {
	n := make(map[string]int, len(requests))
	for _, r := range requests {
		if r.Request != nil {
			n[r.Request.RID]++
		}
	}
	return n
}

// Duplicates returns the rids with more than one terminal row, sorted.
func Duplicates(requests []Record) []string {
	var out []string
	for rid, n := range Terminals(requests) {
		if n > 1 {
			out = append(out, rid)
		}
	}
	slices.Sort(out)
	return out
}
