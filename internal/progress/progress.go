// Package progress is the progress display of narwhal's long commands
// (narwhal-profile, narwhal bench, narwhal-check): on a terminal, a
// redrawn bar (schollz/progressbar); anywhere else — a CI log, a pipe, a
// file — one plain line per step and never a carriage return or an
// escape code; with Quiet, nothing. It writes only to the writer it is
// given (stderr), so a command's stdout stays its result.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// steps is the bar's resolution: Set takes a fraction.
const steps = 1000

// Bar is one command's progress.
type Bar struct {
	mu    sync.Mutex // guards every field below and the writes to w
	w     io.Writer
	name  string
	quiet bool
	pb    *progressbar.ProgressBar // nil off a terminal
	start time.Time
	last  string // the last line written off a terminal
	done  bool
}

// New is a bar named name (the command) writing to w; quiet shows
// nothing. Off a terminal it writes a line per Set whose text changed.
func New(w io.Writer, name string, quiet bool) *Bar {
	b := &Bar{w: w, name: name, quiet: quiet, start: time.Now()}
	if !quiet && IsTerminal(w) {
		b.pb = progressbar.NewOptions(steps, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(name),
			progressbar.OptionSetPredictTime(true), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowDescriptionAtLineEnd())
	}
	return b
}

// IsTerminal says w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Set shows the share done (0 to 1) and what is happening now.
func (b *Bar) Set(frac float64, detail string) {
	if b.quiet {
		return
	}
	frac = min(1, max(0, frac))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	if b.pb != nil {
		b.pb.Describe(b.name + ": " + detail)
		_ = b.pb.Set(int(frac * steps))
		return
	}
	line := fmt.Sprintf("%s: %s (%.0f%%%s)", b.name, detail, 100*frac, b.etaLocked(frac))
	if detail != b.last {
		fmt.Fprintln(b.w, line)
		b.last = detail
	}
}

// etaLocked is ", eta D" from the elapsed time and the share done, ""
// before anything is done. Called with mu held.
func (b *Bar) etaLocked(frac float64) string {
	if frac <= 0 || frac >= 1 {
		return ""
	}
	el := time.Since(b.start)
	return ", eta " + (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
}

// Finish ends the bar: the terminal's line is completed, the plain
// output gets a last line with the elapsed time.
func (b *Bar) Finish(detail string) {
	if b.quiet {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	if b.pb != nil {
		b.pb.Describe(b.name + ": " + detail)
		_ = b.pb.Finish()
		fmt.Fprintln(b.w)
		return
	}
	fmt.Fprintf(b.w, "%s: %s (%s)\n", b.name, detail, time.Since(b.start).Round(100*time.Millisecond))
}
