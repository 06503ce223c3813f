package diagnose

import (
	"regexp"
	"strings"
)

// Python traceback tracking. Each process has its own tracker, so the
// tracebacks of interleaved ranks ("(VllmWorker TP0 pid=1)" and
// "(VllmWorker TP1 pid=2)" lines mixed) are assembled separately. vLLM
// logs a traceback either raw (stderr) or through its logger, which repeats
// the prefix and header on every line; after splitLine both look alike.

// phase is where a process was in its start-up when a line was printed,
// from vLLM's own progress lines.
type phase uint8

const (
	phaseNone      phase = iota
	phaseLoading         // loading weights
	phaseLoaded          // weights loaded (profiling, KV cache set-up)
	phaseCapturing       // capturing CUDA graphs
	phaseCaptured        // graphs captured
)

// sig are call-stack signals read from any frame (engine or not).
type sig uint8

const (
	sigLoad    sig = 1 << iota // load_model, load_weights, create_weights…
	sigCapture                 // capture_model, torch.cuda.graphs…
)

var loadFuncs = map[string]bool{
	"load_model": true, "load_weights": true, "get_model": true, "create_weights": true,
	"initialize_model": true, "_initialize_model": true, "load_weights_and_postprocess": true,
	"_init_model": true,
}

var captureFuncs = map[string]bool{
	"capture_model": true, "_capture_cudagraphs": true, "capture_end": true, "capture_begin": true,
	"_capture_cudagraph": true, "capture": true,
}

// exception is one exception the log shows. class and msg are log text
// and stay in the package; only validated forms leave it.
type exception struct {
	line    int
	proc    procKey
	class   string // as printed; "" when the line names none
	msg     string // the first line of the message
	modules []string
	sigs    sig
	phase   phase
	file    string // the header's file stem of the exception line
	// raise is the innermost frame's raise statement as "Class: literals"
	// ("" when that statement is not a raise): what was raised, even when
	// the exception line itself was cut.
	raise string
}

// innermost returns the innermost engine module of the traceback, or "".
func (e *exception) innermost() string {
	if len(e.modules) == 0 {
		return ""
	}
	return e.modules[len(e.modules)-1]
}

// tbBuilder is a traceback being read.
type tbBuilder struct {
	modules []string
	sigs    sig
	// The innermost frame's source statement when it is a raise: if the
	// log ends before the exception line (a paste cut short), the string
	// literals of that statement are the message it raised.
	raiseLine  int
	raiseClass string
	raiseText  []string
}

// maxRaiseText bounds the literals kept of one raise statement.
const maxRaiseText = 2 << 10

var raiseStmt = regexp.MustCompile(`^\s*raise ([A-Za-z_][A-Za-z0-9_.]{0,127})\(`)
var pyLiteral = regexp.MustCompile(`[fr]?"((?:[^"\\]|\\.){0,512})"|[fr]?'((?:[^'\\]|\\.){0,512})'`)

// source reads a source line of the innermost frame.
func (tb *tbBuilder) source(ln *line) {
	if tb.raiseLine == 0 {
		m := raiseStmt.FindStringSubmatch(ln.msg)
		if m == nil {
			return
		}
		tb.raiseLine, tb.raiseClass = ln.n, m[1]
	}
	for _, m := range pyLiteral.FindAllStringSubmatch(ln.msg, -1) {
		if n := len(strings.Join(tb.raiseText, "")); n+len(m[1])+len(m[2]) <= maxRaiseText {
			tb.raiseText = append(tb.raiseText, m[1]+m[2])
		}
	}
}

// openRaise is the exception an unterminated traceback was raising, and
// its message from the raise statement's literals; ok is false when the
// innermost frame's statement is not a raise.
func (tb *tbBuilder) openRaise(proc procKey, ph phase) (exception, bool) {
	if tb == nil || tb.raiseLine == 0 {
		return exception{}, false
	}
	class := tb.raiseClass
	if i := strings.LastIndexByte(class, '.'); i >= 0 {
		class = class[i+1:]
	}
	return exception{line: tb.raiseLine, proc: proc, class: class, msg: strings.Join(tb.raiseText, ""), modules: tb.modules, sigs: tb.sigs, phase: ph, raise: tb.raised()}, true
}

// raised is the raise statement as "Class: literals", or "".
func (tb *tbBuilder) raised() string {
	if tb.raiseLine == 0 {
		return ""
	}
	return tb.raiseClass + ": " + strings.Join(tb.raiseText, "")
}

// procState is one process's scan state.
type procState struct {
	tb      *tbBuilder
	phase   phase
	lastExc int // index of the process's latest exception, -1 if none
}

const tracebackHead = "Traceback (most recent call last):"

// tbResult is what one line means to the traceback tracker.
type tbResult uint8

const (
	tbNone     tbResult = iota // not part of a traceback
	tbInterior                 // a frame, a source line, a caret line: code, not a message
	tbEnd                      // the exception line that ends a traceback (or a bare one)
)

// trackTraceback feeds one line to its process's tracker. It returns the
// exception the line ends, if it ends one. Interior lines quote source
// code ("raise ValueError(f\"NCCL error: …\")"), which matchers must not
// read as a message.
func trackTraceback(ps *procState, ln *line) (exception, tbResult) {
	msg := ln.msg
	if strings.HasPrefix(msg, tracebackHead) || strings.HasSuffix(msg, tracebackHead) {
		ps.tb = &tbBuilder{}
		return exception{}, tbNone
	}
	if ps.tb == nil && strings.HasPrefix(msg, "  File \"") && strings.Contains(msg, "\", line ") {
		// A traceback whose head was cut off (a paste that starts mid-way):
		// its frames still say where the exception was raised.
		ps.tb = &tbBuilder{}
	}
	if ps.tb != nil {
		switch {
		case strings.HasPrefix(msg, "  File \""):
			ps.tb.frame(msg)
			ps.tb.raiseLine, ps.tb.raiseText = 0, ps.tb.raiseText[:0]
			return exception{}, tbInterior
		case indentedException(msg):
			// A traceback printed indented as a block (V0's multiproc worker
			// logs its frames at two spaces, code at four): the exception
			// line sits at the frames' indent.
			msg = strings.TrimLeft(msg, " ")
		case msg == "" || msg[0] == ' ' || msg[0] == '\t' || strings.HasPrefix(msg, "^"):
			ps.tb.source(ln)
			return exception{}, tbInterior // source lines, carets, blank separators
		}
		tb := ps.tb
		ps.tb = nil
		class, rest := splitException(msg, false)
		return exception{line: ln.n, proc: ln.proc, class: class, msg: rest, modules: tb.modules, sigs: tb.sigs, phase: ps.phase, file: ln.file, raise: tb.raised()}, tbEnd
	}
	if class, rest := splitException(msg, true); class != "" {
		return exception{line: ln.n, proc: ln.proc, class: class, msg: rest, phase: ps.phase, file: ln.file}, tbEnd
	}
	return exception{}, tbNone
}

// frame reads `  File "/…/vllm/v1/worker/gpu_worker.py", line 136, in load_model`.
func (tb *tbBuilder) frame(msg string) {
	rest := msg[len(`  File "`):]
	q := strings.IndexByte(rest, '"')
	if q < 0 {
		return
	}
	path := rest[:q]
	fn := ""
	if i := strings.LastIndex(rest[q:], ", in "); i >= 0 {
		fn = strings.TrimSpace(rest[q+i+len(", in "):])
	}
	if loadFuncs[fn] {
		tb.sigs |= sigLoad
	}
	if captureFuncs[fn] || strings.HasSuffix(path, "/torch/cuda/graphs.py") {
		tb.sigs |= sigCapture
	}
	if m := engineModule(path); m != "" {
		if len(tb.modules) == maxFrames {
			copy(tb.modules, tb.modules[1:]) // keep the innermost frames
			tb.modules = tb.modules[:maxFrames-1]
		}
		tb.modules = append(tb.modules, m)
	}
}

// engineModule turns a file path inside the vllm package into its dotted
// module: ".../site-packages/vllm/v1/core/kv_cache_utils.py" →
// "vllm.v1.core.kv_cache_utils". Paths outside the package give "".
func engineModule(path string) string {
	path = strings.ReplaceAll(path, `\`, "/")
	i := strings.LastIndex(path, "/vllm/")
	var rel string
	switch {
	case i >= 0:
		rel = path[i+1:]
	case strings.HasPrefix(path, "vllm/"):
		rel = path
	default:
		return ""
	}
	if !strings.HasSuffix(rel, ".py") {
		return ""
	}
	mod := strings.ReplaceAll(strings.TrimSuffix(rel, ".py"), "/", ".")
	mod = strings.TrimSuffix(mod, ".__init__")
	if _, ok := ParseModule(mod); !ok {
		return ""
	}
	return mod
}

// splitException reads "torch.OutOfMemoryError: CUDA out of memory…" into
// class and message. bare says the line is not a traceback's last line:
// then only names that look like exception classes count.
func splitException(msg string, bare bool) (string, string) {
	name, rest, found := strings.Cut(msg, ": ")
	if !found {
		if bare {
			return "", ""
		}
		name, rest = strings.TrimSuffix(msg, ":"), ""
	}
	if len(name) == 0 || len(name) > identMax || !looksLikeClass(name) {
		return "", ""
	}
	if bare && !exceptionSuffix(name) {
		return "", ""
	}
	return name, rest
}

func looksLikeClass(s string) bool {
	if !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '_' || c == '.') {
			return false
		}
	}
	return !strings.HasSuffix(s, ".") && !strings.Contains(s, "..")
}

func exceptionSuffix(s string) bool {
	for _, suf := range [...]string{"Error", "Exception", "Exit", "Interrupt", "Fault"} {
		if strings.HasSuffix(s, suf) {
			return true
		}
	}
	return false
}

// indentedException reports a line at a frame's two-space indent that
// names an exception class ("  torch.distributed.DistStoreError: …").
func indentedException(msg string) bool {
	if len(msg) < 3 || msg[0] != ' ' || msg[1] != ' ' || msg[2] == ' ' || msg[2] == '^' {
		return false
	}
	class, _ := splitException(msg[2:], true)
	return class != ""
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
