package journal

import (
	"encoding/json"
	"fmt"
)

// Torn counts the torn rows a reader skipped. A torn row is a line that
// is not a whole JSON value: a writer was killed in the middle of it and
// the next writer to open the file ended the line (endTornLine), so the
// rows after it are whole. Every reader skips and counts such a line, as
// a resume does (RunTail.Damaged): one torn row must not blind the
// evidence pass or the report to the rest of the journal. A line that is
// whole JSON but not a row this build reads (another schema, a newer
// version, a row without rid or event) is still an error: that is a
// different file or a different build, not a crash.
type Torn struct {
	Rows int `json:"rows"`
	// First is the first torn row's file and line ("journal.jsonl:12");
	// "" when Rows is 0.
	First string `json:"first,omitempty"`
}

// add counts one torn row at name:line.
func (t *Torn) add(name string, line int) {
	if t.Rows == 0 {
		t.First = fmt.Sprintf("%s:%d", name, line)
	}
	t.Rows++
}

// Merge adds o's rows to t, keeping t's first when it has one.
func (t *Torn) Merge(o Torn) {
	if t.Rows == 0 {
		t.First = o.First
	}
	t.Rows += o.Rows
}

// String says how many rows were skipped and where the first was, for a
// report's or a log's one line.
func (t Torn) String() string {
	if t.Rows == 0 {
		return "no torn rows"
	}
	return fmt.Sprintf("%d torn row(s) skipped, the first at %s", t.Rows, t.First)
}

// isTorn says a line that did not parse is a torn row: not a whole JSON
// value. It is called only on lines that failed, so the valid path pays
// nothing for it.
func isTorn(line []byte) bool { return !json.Valid(line) }
