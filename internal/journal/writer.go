package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// Options configure a Writer. Zero values take production defaults.
type Options struct {
	// Package and Version name the writer in the meta row; Package
	// defaults to "narwhal", Version to "dev".
	Package string
	Version string
	// Git is the commit the binary was built from; "" writes null.
	Git string
	// Source is "sha256:<hex>"; "" computes the digest of the running
	// executable (tests set it to skip hashing the test binary).
	Source string
	// TokenAccounting is the run's default, TokenIDs when "".
	TokenAccounting string
	// Clock gives the run id its Unix seconds; ports.SystemClock() if nil.
	Clock ports.Clock
	// Rng gives the run id its 32 random bits; a fresh random source if
	// nil. Tests pass ports.NewSeededRng for a reproducible run id.
	Rng ports.Rng
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("journal is closed")

// Writer appends rows of one run. It is safe for concurrent use: each row
// is marshalled outside the lock and written with a single Write call
// under it, so rows land whole and in call order.
type Writer struct {
	run     string
	tokens  string
	name    string
	mu      sync.Mutex
	w       io.Writer
	closer  io.Closer // nil when the caller owns w
	closed  bool
	written int64
	path    string // the file's path; "" for New

	amu      sync.Mutex // guards pending and flushing (admission group commit)
	pending  *batch     // admission records queued for the next Write
	flushing bool       // a caller is writing batches

	recent recent // the latest rows that did not complete, for the dashboard
}

// Open creates path's parent directories, opens path for appending and
// writes the meta row. Rows from earlier runs stay; each open starts a new
// run with its own meta row and run id.
func Open(path string, opts Options) (*Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open journal %s: %w; check --journal and the directory's permissions", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w; check --journal and the file's permissions", path, err)
	}
	if err := endTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	w, err := newWriter(f, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer, w.path = f, path
	return w, nil
}

// endTornLine ends a final line that a killed writer left without its
// newline, so this run's meta row starts a line of its own and readers
// report one torn row instead of a garbled one.
func endTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return nil // opened write-only on some systems: nothing to mend
	}
	if last[0] == '\n' {
		return nil
	}
	_, err = f.Write([]byte{'\n'})
	return err
}

// New writes the meta row to w and returns a Writer over it, for tests
// and in-memory journals. The caller keeps ownership of w: Close does not
// close it. The Writer serialises its writes, so w needs no locking.
func New(w io.Writer, opts Options) (*Writer, error) { return newWriter(w, "journal", opts) }

func newWriter(w io.Writer, name string, opts Options) (*Writer, error) {
	opts = withDefaults(opts)
	if opts.Source == "" {
		src, err := ExecutableDigest()
		if err != nil {
			return nil, fmt.Errorf("open journal %s: %w", name, err)
		}
		opts.Source = src
	}
	jw := &Writer{run: runID(opts), tokens: opts.TokenAccounting, name: name, w: w}
	line, err := json.Marshal(map[string]Meta{"meta": metaOf(opts)})
	if err != nil {
		return nil, fmt.Errorf("open journal %s: meta row: %w", name, err)
	}
	if err := jw.writeLine(line); err != nil {
		return nil, err
	}
	return jw, nil
}

func withDefaults(o Options) Options {
	if o.Package == "" {
		o.Package = "narwhal"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.TokenAccounting == "" {
		o.TokenAccounting = TokenIDs
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock()
	}
	return o
}

// runID is "<unix seconds>-<8 lowercase hex>" (§4).
func runID(o Options) string {
	var bits uint32
	if o.Rng != nil {
		bits = uint32(o.Rng.Uint64())
	} else {
		bits = rand.Uint32()
	}
	return fmt.Sprintf("%d-%08x", o.Clock.Now().Unix(), bits)
}

// Run returns this writer's run id.
func (w *Writer) Run() string { return w.run }

// Path returns the journal file's path, "" for a Writer made by New.
func (w *Writer) Path() string { return w.path }

// Request writes one terminal request row. The row is checked first
// (RequestRow.Validate after deriving the outcome flags); an invalid row
// is not written and the error says which field to fix.
func (w *Writer) Request(row *RequestRow) error {
	if row == nil {
		return fmt.Errorf("journal %s: nil request row", w.name)
	}
	c := row.normalized(w.tokens)
	if err := c.Validate(); err != nil {
		return err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("journal %s: row %s: %w", w.name, row.RID, err)
	}
	if err := w.writeLine(w.envelope(body)); err != nil {
		return err
	}
	w.recent.add(c)
	return nil
}

// Event writes one event row: the envelope, "event", "at", then the
// fields in key order.
func (w *Writer) Event(ev Event) error {
	if err := ev.validate(); err != nil {
		return err
	}
	head, err := json.Marshal(struct {
		Event string  `json:"event"`
		At    float64 `json:"at"`
	}{ev.Name, ev.At})
	if err != nil {
		return fmt.Errorf("journal %s: event %s: %w", w.name, ev.Name, err)
	}
	body := head
	if len(ev.Fields) > 0 {
		fields, err := json.Marshal(ev.Fields)
		if err != nil {
			return fmt.Errorf("journal %s: event %s: %w; fields must be JSON values", w.name, ev.Name, err)
		}
		body = append(append(head[:len(head)-1:len(head)-1], ','), fields[1:]...)
	}
	return w.writeLine(w.envelope(body))
}

// envelope prefixes a marshalled object with schema, schema_version and
// run, so every row starts with them (§4).
func (w *Writer) envelope(obj []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(obj) + 80)
	fmt.Fprintf(&b, `{"schema":%q,"schema_version":%d,"run":%q`, Schema, SchemaVersion, w.run)
	if len(obj) > 2 {
		b.WriteByte(',')
	}
	b.Write(obj[1:])
	return b.Bytes()
}

// writeLine writes line plus '\n' in one Write call. A short write leaves
// a partial line; the writer then refuses further rows so that the file
// holds at most one damaged tail, which readers report by line.
func (w *Writer) writeLine(line []byte) error {
	return w.writeRaw(append(line, '\n'))
}

// writeRaw writes whole lines, each ending in '\n', in one Write call.
func (w *Writer) writeRaw(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("journal %s: %w", w.name, ErrClosed)
	}
	n, err := w.w.Write(line)
	w.written += int64(n)
	if err != nil {
		w.closed = true
		return fmt.Errorf("journal %s: write failed after %d bytes: %w; the journal is closed, check the disk", w.name, w.written, err)
	}
	return nil
}

// Close closes the file. It is idempotent; writes after it fail with
// ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closer == nil {
		w.closed = true
		return nil
	}
	c := w.closer
	w.closer, w.closed = nil, true
	if err := c.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", w.name, err)
	}
	return nil
}
