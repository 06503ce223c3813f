package journal

import (
	"encoding/json"
	"fmt"
)

// EventRequestAdmitted names the admission record: the router admitted
// the request and is about to work on it. A router killed mid-request
// leaves the record without a terminal row; the router that resumes from
// the same journal closes it with a terminal row of reason
// fault.RouterLost (docs/reliability.md, "Router crash accounting").
const EventRequestAdmitted = "request_admitted"

// Admission is the body of an admission record. Arrived is on the
// run's monotonic clock, as the terminal row's arrived is.
type Admission struct {
	RID       string  `json:"rid"`
	ClientRID *string `json:"client_rid"`
	// ClientRIDBytes: as the request row's, when client_rid was cut.
	ClientRIDBytes *int    `json:"client_rid_bytes,omitempty"`
	Arrived        float64 `json:"arrived"`
	Endpoint       string  `json:"endpoint"`
}

// admissionRow is the row's shape after the envelope: an event row, so
// readers that know only events and requests still parse it.
type admissionRow struct {
	Event string  `json:"event"`
	At    float64 `json:"at"`
	Admission
}

// queued is one row (an admission record or a request row) waiting for
// the group commit: the caller that writes it sets err, then closes done.
type queued struct {
	line []byte
	next *queued // the record queued before this one
	done chan struct{}
	err  error
}

// Admitted writes an admission record and returns once it is in the
// file. Concurrent callers share one Write call (group commit): the
// first caller writes everything queued meanwhile, so under load the cost
// is one syscall per batch, not per request. The queue is lock-free; the
// Write itself takes the writer's one lock. It does not fsync: a process
// kill loses nothing the kernel accepted.
func (w *Writer) Admitted(a Admission) error {
	if a.RID == "" {
		return fmt.Errorf("journal %s: admission record with an empty rid", w.name)
	}
	if a.ClientRIDBytes == nil {
		a.ClientRID, a.ClientRIDBytes = capClientRID(a.ClientRID)
	}
	body, err := json.Marshal(admissionRow{Event: EventRequestAdmitted, At: a.Arrived, Admission: a})
	if err != nil {
		return fmt.Errorf("journal %s: admission %s: %w", w.name, a.RID, err)
	}
	return w.commit(append(w.envelope(body), '\n'))
}

// commit writes line (whole rows, each ending in '\n') through the group
// commit and returns once it is in the file.
func (w *Writer) commit(line []byte) error {
	mine := &queued{line: line, done: make(chan struct{})}
	for {
		mine.next = w.queue.Load()
		if w.queue.CompareAndSwap(mine.next, mine) {
			break
		}
	}
	if w.flushing.CompareAndSwap(false, true) {
		w.flushQueue()
	}
	<-mine.done
	return mine.err
}

// flushQueue writes queued batches until none is left; its caller set
// flushing. A record queued just as it gives up flushing is caught by the
// check after: whoever wins flushing then writes it.
func (w *Writer) flushQueue() {
	for {
		for b := w.queue.Swap(nil); b != nil; b = w.queue.Swap(nil) {
			w.writeBatch(b)
		}
		w.flushing.Store(false)
		if w.queue.Load() == nil || !w.flushing.CompareAndSwap(false, true) {
			return
		}
	}
}

// writeBatch writes the records of one batch (newest first, as queued) in
// arrival order with one Write, and wakes their callers.
func (w *Writer) writeBatch(newest *queued) {
	var recs []*queued
	n := 0
	for q := newest; q != nil; q = q.next {
		recs = append(recs, q)
		n += len(q.line)
	}
	lines := make([]byte, 0, n)
	for i := len(recs) - 1; i >= 0; i-- {
		lines = append(lines, recs[i].line...)
	}
	err := w.writeRaw(lines)
	for _, q := range recs {
		q.err = err
		close(q.done)
	}
}
