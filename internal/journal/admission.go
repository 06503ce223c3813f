package journal

import (
	"encoding/json"
	"fmt"
)

// EventRequestAdmitted names the admission record: the router admitted
// the request and is about to work on it. A router killed mid-request
// leaves the record without a terminal row; the router that resumes from
// the same journal closes it with a terminal row of reason
// ReasonRouterLost (docs/reliability.md, "Router crash accounting").
const EventRequestAdmitted = "request_admitted"

// Admission is the body of an admission record. Arrived is on the
// run's monotonic clock, as the terminal row's arrived is.
type Admission struct {
	RID       string  `json:"rid"`
	ClientRID *string `json:"client_rid"`
	Arrived   float64 `json:"arrived"`
	Endpoint  string  `json:"endpoint"`
}

// admissionRow is the row's shape after the envelope: an event row, so
// readers that know only events and requests still parse it.
type admissionRow struct {
	Event string  `json:"event"`
	At    float64 `json:"at"`
	Admission
}

// batch is one group of admission records written by a single Write.
type batch struct {
	lines []byte
	done  chan struct{} // closed once lines were written; err is set before
	err   error
}

// Admitted writes an admission record and returns once it is in the
// file. Concurrent callers share one Write call (group commit): the
// first caller writes everything queued meanwhile, so under load the cost
// is one syscall per batch, not per request. It does not fsync: a
// process kill loses nothing the kernel accepted.
func (w *Writer) Admitted(a Admission) error {
	if a.RID == "" {
		return fmt.Errorf("journal %s: admission record with an empty rid", w.name)
	}
	body, err := json.Marshal(admissionRow{Event: EventRequestAdmitted, At: a.Arrived, Admission: a})
	if err != nil {
		return fmt.Errorf("journal %s: admission %s: %w", w.name, a.RID, err)
	}
	line := append(w.envelope(body), '\n')

	w.amu.Lock()
	if w.pending == nil {
		w.pending = &batch{done: make(chan struct{})}
	}
	mine := w.pending
	mine.lines = append(mine.lines, line...)
	if w.flushing {
		w.amu.Unlock()
		<-mine.done
		return mine.err
	}
	w.flushing = true
	w.flushPendingLocked()
	w.flushing = false
	w.amu.Unlock()
	return mine.err
}

// flushPendingLocked writes queued batches until none is left. Called
// with amu held; it drops amu around each Write so callers can queue the
// next batch meanwhile.
func (w *Writer) flushPendingLocked() {
	for w.pending != nil {
		b := w.pending
		w.pending = nil
		w.amu.Unlock()
		b.err = w.writeRaw(b.lines)
		close(b.done)
		w.amu.Lock()
	}
}
