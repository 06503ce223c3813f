package takeover

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// Writer writes the handoff document off the request path. Changed only
// marks the document dirty and, when no write is running, starts one goroutine that
// writes until nothing is pending and then exits; changes made while a
// write runs coalesce into one more write. Flush writes at once for
// callers that want the error. No goroutine lives while the writer is
// idle, so a router that is never closed leaks none.
type Writer struct {
	write func() error
	log   *slog.Logger

	// io serialises calls of write: a background write and a Flush never
	// overlap on the same file.
	io sync.Mutex
	// mu guards pending, running and closed; it is never held across a
	// write, so Changed returns at once.
	mu      sync.Mutex
	pending bool
	running bool
	closed  bool
	drains  sync.WaitGroup        // the running background write, for Close
	err     atomic.Pointer[error] // the last write's
}

// NewWriter returns a writer that saves the document with write and
// logs its failures on log (which names the file).
func NewWriter(write func() error, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{write: write, log: log}
}

// Changed asks for a write soon and returns without waiting. After Close
// it does nothing: the router is stopped.
func (w *Writer) Changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.pending = true
	if w.running {
		return
	}
	w.running = true
	w.drains.Add(1)
	go w.drain()
}

// drain writes while changes are pending.
func (w *Writer) drain() {
	defer w.drains.Done()
	for w.take() {
		_ = w.Flush()
	}
}

// take clears the pending mark, or ends the drain when nothing is pending.
func (w *Writer) take() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	more := w.pending
	w.pending, w.running = false, more
	return more
}

// Flush writes now. A failure is logged and kept for Err until a write
// succeeds: a restarted router would resume from an older document.
func (w *Writer) Flush() error {
	w.io.Lock()
	err := w.write()
	w.io.Unlock()
	if err != nil {
		w.log.Error("writing the handoff document failed; a restarted router would resume from an older one", "err", err)
	}
	w.err.Store(&err)
	return err
}

// Err is the last write's error, nil after a success.
func (w *Writer) Err() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Close waits for the background write to write every change made
// before it, stops further background writes, and returns the last
// write's error.
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.drains.Wait()
	return w.Err()
}
