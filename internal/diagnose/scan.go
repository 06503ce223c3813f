package diagnose

import (
	"io"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// The streaming scanner. It reads a log of any size line by line with
// bounded memory through vllmlog (the one reader of vLLM logs: line cap,
// prefixes, header), and every table the scan grows has a cap. What is
// left of a line is the message, which the traceback tracker and the
// matchers read.

// Caps on what a scan keeps, so memory stays bounded for any input.
const (
	maxProcs      = 256 // distinct processes tracked; later ones share one slot
	maxFrames     = 48  // engine frames kept per traceback (innermost kept)
	maxExceptions = 512 // exceptions kept (the first ones: root causes come first)
)

// procKey identifies the process a line came from: a pid from the vLLM
// prefix, a torch rank from "[rankN]:", or the unprefixed main process.
type procKey struct {
	kind uint8 // 0 main, 1 pid, 2 torch rank
	id   int64
}

// line is one scanned line. msg and file are log text: they never leave
// the package (only typed values extracted from them do).
type line struct {
	n     int
	proc  procKey
	level vllmlog.Level
	file  string // the header's file stem ("kv_cache_utils"), "" if none
	msg   string
}

// lineReader is vllmlog's Reader with its count of cut lines.
type lineReader struct {
	r         *vllmlog.Reader
	truncated int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: vllmlog.NewReader(r, max)}
}

// next returns the next line (vllmlog.Reader.Next).
func (lr *lineReader) next() ([]byte, error) {
	b, err := lr.r.Next()
	lr.truncated = lr.r.Truncated()
	return b, err
}

// splitLine is vllmlog.Split with the process the line came from.
func splitLine(raw []byte, n int) line {
	sp := vllmlog.Split(raw)
	ln := line{n: n, level: sp.Level, file: sp.File, msg: sp.Msg}
	switch {
	case sp.HasPID:
		ln.proc = procKey{kind: 1, id: sp.PID}
	case sp.HasRank:
		ln.proc = procKey{kind: 2, id: sp.TorchRank}
	}
	return ln
}
