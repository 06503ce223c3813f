package journal

import "sync"

// RecentLimit is how many of the latest non-completed request rows a
// Writer keeps in memory for the live dashboard.
const RecentLimit = 50

// recent is a ring of the latest rows that did not complete.
type recent struct {
	mu   sync.Mutex // guards rows and next
	rows []*RequestRow
	next int
}

func (r *recent) add(row *RequestRow) {
	if row.Terminal == TerminalCompleted {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rows) < RecentLimit {
		r.rows = append(r.rows, row)
		return
	}
	r.rows[r.next] = row
	r.next = (r.next + 1) % RecentLimit
}

// RecentFailures returns up to RecentLimit of the latest terminal rows
// that did not complete (failed, refused, rejected, expired, invalid,
// cancelled), newest first, as written. The rows are shared: read only.
func (w *Writer) RecentFailures() []*RequestRow {
	r := &w.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*RequestRow, 0, len(r.rows))
	for i := len(r.rows) - 1; i >= 0; i-- {
		out = append(out, r.rows[(r.next+i)%len(r.rows)])
	}
	return out
}
