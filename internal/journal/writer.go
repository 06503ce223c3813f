package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

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
	// MaxBytes rotates the file (Open only) before a write would take it
	// past this size: the full file is renamed to <path>.<N> and a new
	// file starts with its own meta row (same run, next part). 0 never
	// rotates. A single write larger than MaxBytes still lands whole.
	MaxBytes int64
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("journal is closed")

// Writer appends rows of one run. It is safe for concurrent use: each row
// is marshalled outside the lock and written with a single Write call
// under it, so rows land whole and in call order.
type Writer struct {
	run      string
	head     []byte // every row's envelope up to its own fields (envelope)
	tokens   string
	name     string
	started  time.Time
	maxBytes int64
	mu       sync.Mutex // guards w, closer, closed, written, fileBytes, meta, followed
	w        io.Writer
	closer   io.Closer // nil when the caller owns w
	closed   bool
	written  int64
	path     string // the file's path; "" for New
	// fileBytes is what the current file holds (rotation's measure); meta
	// is the meta row the next rotated file starts with.
	fileBytes int64
	meta      Meta
	// followed is when the writer last checked that its file is still
	// the one at path: another router sharing the journal may have
	// rotated it (rotate.go).
	followed time.Time

	// The group commit's queue is lock-free (admission.go):
	// mu above is the writer's one lock.
	queue    atomic.Pointer[queued] // rows waiting for the next Write, newest first
	flushing atomic.Bool            // a caller is writing batches

	recent recent // the latest rows that did not complete, for the dashboard
}

// Open creates path's parent directories, opens path for appending and
// writes the meta row. Rows from earlier runs stay; each open starts a new
// run with its own meta row and run id.
func Open(path string, opts Options) (*Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open journal %s: %w; check --journal and the directory's permissions", path, err)
	}
	f, size, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(f, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer, w.path, w.fileBytes = f, path, size
	if err := w.start(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// openAppend opens path for appending, mends a torn last line and
// returns the file's size.
func openAppend(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("open journal %s: %w; check --journal and the file's permissions", path, err)
	}
	if err := endTornLine(f); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open journal %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open journal %s: %w", path, err)
	}
	return f, st.Size(), nil
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
func New(w io.Writer, opts Options) (*Writer, error) {
	opts.MaxBytes = 0 // rotation renames files: only Open's writer has one
	jw, err := newWriter(w, "journal", opts)
	if err != nil {
		return nil, err
	}
	return jw, jw.start()
}

func newWriter(w io.Writer, name string, opts Options) (*Writer, error) {
	opts = withDefaults(opts)
	if opts.Source == "" {
		src, err := ExecutableDigest()
		if err != nil {
			return nil, fmt.Errorf("open journal %s: %w", name, err)
		}
		opts.Source = src
	}
	started := opts.Clock.Now()
	run := runID(opts)
	return &Writer{run: run, head: envelopeHead(run), tokens: opts.TokenAccounting, name: name, w: w, started: started,
		maxBytes: opts.MaxBytes, meta: metaOf(opts, started)}, nil
}

// start writes the run's first meta row; a file already too full for it
// is rotated first, so the run's part 1 starts a file.
func (w *Writer) start() error {
	line, err := metaLine(w.meta)
	if err != nil {
		return fmt.Errorf("open journal %s: %w", w.name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maxBytes > 0 && w.fileBytes > 0 && w.fileBytes+int64(len(line)) > w.maxBytes {
		if err := w.swapFileLocked(); err != nil {
			return err
		}
	}
	return w.writeLocked(line)
}

func metaLine(m Meta) ([]byte, error) {
	line, err := json.Marshal(map[string]Meta{"meta": m})
	if err != nil {
		return nil, fmt.Errorf("meta row: %w", err)
	}
	return append(line, '\n'), nil
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

// Started returns the run's start, the wall-clock time in the meta row.
func (w *Writer) Started() time.Time { return w.started }

// Path returns the journal file's path, "" for a Writer made by New.
func (w *Writer) Path() string {
	if w == nil {
		return "" // no journal: callers that only pass the path on need no check
	}
	return w.path
}

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
	if err := w.commit(append(w.envelope(body), '\n')); err != nil {
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
	b := make([]byte, 0, len(w.head)+len(obj)+2)
	b = append(b, w.head...)
	if len(obj) > 2 {
		b = append(b, ',')
	}
	return append(b, obj[1:]...)
}

// envelopeHead is the start every row of run shares.
func envelopeHead(run string) []byte {
	return fmt.Appendf(nil, `{"schema":%q,"schema_version":%d,"run":%q`, Schema, SchemaVersion, run)
}

// writeLine writes line plus '\n' in one Write call. A short write leaves
// a partial line; the writer then refuses further rows so that the file
// holds at most one damaged tail, which readers report by line.
func (w *Writer) writeLine(line []byte) error {
	return w.writeRaw(append(line, '\n'))
}

// writeRaw writes whole lines, each ending in '\n', in one Write call,
// rotating first when the lines would take the file past MaxBytes.
func (w *Writer) writeRaw(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("journal %s: %w", w.name, ErrClosed)
	}
	if err := w.followLocked(); err != nil {
		w.closed = true
		return err
	}
	if w.maxBytes > 0 && w.fileBytes > 0 && w.fileBytes+int64(len(line)) > w.maxBytes {
		if err := w.rotateLocked(); err != nil {
			w.closed = true
			return err
		}
	}
	return w.writeLocked(line)
}

// writeLocked is one Write call; a failure closes the writer.
func (w *Writer) writeLocked(line []byte) error {
	n, err := w.w.Write(line)
	w.written += int64(n)
	w.fileBytes += int64(n)
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
