package diagnose

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// Status says whether a matcher recognised the failure.
type Status string

// Statuses.
const (
	StatusRecognized   Status = "recognized"
	StatusUnrecognized Status = "unrecognized"
	// StatusNoFailure: the log shows no failure at all (no exception, no
	// error line any matcher or the fallback would record).
	StatusNoFailure Status = "no_failure"
)

// Wording identifies which message form a matcher recognised (for
// example the V0 or the V1 text of one family). Closed set, one per
// matcher pattern.
type Wording string

// Diagnosis is what one log says about one failure.
type Diagnosis struct {
	Status      Status      `json:"status"`
	Family      Family      `json:"family"`
	Wording     Wording     `json:"wording"` // "" when unrecognized
	Fingerprint Fingerprint `json:"fingerprint"`
	// FingerprintDigest is Fingerprint.Digest().
	FingerprintDigest string `json:"fingerprint_digest"`
	// MessageTemplateDigest is the digest of the root-cause exception's
	// message with numbers, sizes, paths, pids, addresses and timestamps
	// replaced by placeholders (the template itself stays inside the
	// package); "" when the log shows no exception. It tells apart two
	// unrecognized failures that share a fingerprint.
	MessageTemplateDigest string      `json:"message_template_digest"`
	Facts                 Facts       `json:"facts"`
	Rejected              []Rejection `json:"rejected"`
	// Evidence are the 1-based line numbers of the lines the diagnosis
	// used, ascending. The lines themselves are not kept.
	Evidence []int `json:"evidence_lines"`
	// Lines read, and how many of them were longer than the line limit
	// (their tail was not read).
	Lines          int `json:"lines"`
	TruncatedLines int `json:"truncated_lines"`
}

// Options are the hardware and model facts a diagnosis validates the log
// against. All optional.
type Options struct {
	// GPU is a name memory.LookupGPU knows ("A100-80GB", "NVIDIA L4");
	// its total memory and compute capability bound the log's figures. An
	// unknown name is an error.
	GPU string
	// GPUTotalBytes overrides the table's total memory (the figure the
	// driver reports).
	GPUTotalBytes *int64
	// ModelMaxLen is the model config's own context limit, when known: a
	// logged max_model_len above it is rejected.
	ModelMaxLen *int64
	// MaxLineBytes bounds how much of one line is read (default 64 KiB);
	// the rest of a longer line is skipped.
	MaxLineBytes int
}

// Caps on what Diagnose keeps besides the scanner's.
const (
	maxHitsPerMatcher = 8
	maxRejections     = 64
	maxEvidence       = 64
	// assocWindow: a matching line within this many lines after an
	// exception of the same process belongs to that exception (multi-line
	// messages, pydantic's "Value error, …" line after its class line).
	assocWindow = 8
)

// hit is one matcher firing on one line.
type hit struct {
	m      *matcher
	family Family
	line   int
	proc   procKey
	phase  phase
	v      vals
	exc    int // index into exceptions, -1 when none
}

// ac is the automaton over every matcher's needles, built once.
var (
	acNeedles  []string
	acNeedleOf []int // needle id → matcher index
	needleAC   = buildAC()
)

func buildAC() *acAutomaton {
	for i, m := range matchers {
		for _, n := range m.needles {
			acNeedles = append(acNeedles, n)
			acNeedleOf = append(acNeedleOf, i)
		}
	}
	return newAC(acNeedles)
}

// scanState is one Diagnose call's state.
type scanState struct {
	procs      map[procKey]*procState
	overflow   procState // shared by processes beyond maxProcs
	exceptions []exception
	hits       []hit
	hitCount   []int // per matcher
	general    vals
	rejected   []Rejection
	crash      bool
	// shutdownLine is the first line of an operator-initiated shutdown.
	shutdownLine int
	firstError   struct {
		line int
		file string
	}
	seen    []int // per matcher: the last line it was considered on
	pending []int
	// wrap is the message a following bare line may continue (a message
	// wrapped when it was pasted or by a terminal).
	wrap wrapState
}

// wrapState is the message that a bare line (no prefix, no header, not
// code) may continue, with the matchers it already satisfied. A wrap may
// have cut a word (the parts join as they are) or eaten the space it fell
// on (they join with one): both readings are kept.
type wrapState struct {
	msgs  [2]string // joined with "" and with " "
	proc  procKey
	lines int   // physical lines joined
	hit   []int // matcher indexes whose needles the message already contains
}

// Wrapped messages: at most this many physical lines and bytes are joined.
const (
	maxWrapLines = 4
	maxWrapBytes = 8 << 10
	minWrapBytes = 40 // a line shorter than this was not wrapped by width
)

func newScanState() *scanState {
	st := &scanState{procs: map[procKey]*procState{}, hitCount: make([]int, len(matchers)), seen: make([]int, len(matchers))}
	st.overflow.lastExc = -1
	return st
}

func (st *scanState) proc(k procKey) *procState {
	if ps, ok := st.procs[k]; ok {
		return ps
	}
	if len(st.procs) >= maxProcs {
		return &st.overflow
	}
	ps := &procState{lastExc: -1}
	st.procs[k] = ps
	return ps
}

// Diagnose reads a log and names its failure. It is deterministic. It
// fails only when the reader fails or the options are invalid; a log
// without a recognisable failure is a Diagnosis with StatusUnrecognized
// (an error it cannot place) or StatusNoFailure (no error at all).
func Diagnose(r io.Reader, opt Options) (Diagnosis, error) {
	hw, err := hardwareFor(opt)
	if err != nil {
		return Diagnosis{}, err
	}
	st := newScanState()
	lr := newLineReader(r, opt.MaxLineBytes)
	n := 0
	for {
		raw, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Diagnosis{}, fmt.Errorf("diagnose: reading the log at line %d: %w", n+1, err)
		}
		n++
		st.line(raw, n)
	}
	st.flushOpenTracebacks()
	d := st.finish(hw)
	d.Lines, d.TruncatedLines = n, lr.truncated
	return d, nil
}

// hardwareFor resolves the options into the facts the log is checked
// against.
func hardwareFor(opt Options) (hardware, error) {
	var hw hardware
	if opt.GPU != "" {
		g, err := memory.LookupGPU(opt.GPU)
		if err != nil {
			return hw, fmt.Errorf("diagnose: %w", err)
		}
		total := g.TotalMemoryBytes
		hw.totalBytes = &total
		if cc, ok := parseCC(g.ComputeCapability); ok {
			hw.cc = &cc
		}
		key := GPUKey{identifier{s: g.Name}}
		hw.gpu = &key
	}
	if opt.GPUTotalBytes != nil {
		if *opt.GPUTotalBytes <= 0 {
			return hw, fmt.Errorf("diagnose: GPU total memory %d bytes: must be positive", *opt.GPUTotalBytes)
		}
		t := *opt.GPUTotalBytes
		hw.totalBytes = &t
	}
	if opt.ModelMaxLen != nil {
		if *opt.ModelMaxLen <= 0 {
			return hw, fmt.Errorf("diagnose: model max length %d: must be positive", *opt.ModelMaxLen)
		}
		m := *opt.ModelMaxLen
		hw.modelMaxLen = &m
	}
	return hw, nil
}

// parseCC reads the GPU table's "8.0".
func parseCC(s string) (ComputeCapability, bool) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	cc := ComputeCapability{Major: a, Minor: b}
	return cc, ok && err1 == nil && err2 == nil && cc.Valid()
}

// line scans one raw line.
func (st *scanState) line(raw []byte, n int) {
	ln := splitLine(raw, n)
	ps := st.proc(ln.proc)
	exc, tb := trackTraceback(ps, &ln)
	if tb == tbInterior {
		st.wrap.msgs = [2]string{} // code ends any message a bare line could continue
		return
	}
	if tb == tbEnd {
		if len(st.exceptions) < maxExceptions {
			st.exceptions = append(st.exceptions, exc)
			ps.lastExc = len(st.exceptions) - 1
		} else {
			ps.lastExc = -1
		}
	}
	if ln.level >= vllmlog.LevelError && st.firstError.line == 0 {
		st.firstError.line, st.firstError.file = n, ln.file
	}
	st.pending = st.pending[:0]
	needleAC.scan(ln.msg, func(id int32) {
		mi := acNeedleOf[id]
		if st.seen[mi] != n {
			st.seen[mi] = n
			st.pending = append(st.pending, mi)
		}
	})
	slices.Sort(st.pending) // table order, whatever order the needles occur in
	for _, mi := range st.pending {
		st.apply(&matchers[mi], mi, &ln, ps)
	}
	if tb == tbEnd && exc.raise != "" {
		// The statement that raised says what the exception line may have
		// lost (a paste cut inside the class name).
		st.scanText(exc.raise, &line{n: n, proc: ln.proc, level: vllmlog.LevelError}, ps)
	}
	st.continueWrap(raw, &ln, tb)
}

// scanText runs the matchers on text as if it were the message of ln, at
// most once per matcher and line.
func (st *scanState) scanText(text string, ln *line, ps *procState) {
	ln.msg = text
	var found []int
	needleAC.scan(text, func(id int32) {
		if mi := acNeedleOf[id]; st.seen[mi] != ln.n && !slices.Contains(found, mi) {
			found = append(found, mi)
		}
	})
	slices.Sort(found)
	for _, mi := range found {
		st.seen[mi] = ln.n
		st.apply(&matchers[mi], mi, ln, ps)
	}
}

// continueWrap joins a bare line to the message before it and runs the
// matchers whose needles only the joined text contains: vLLM prints its
// errors on one line, but a pasted or terminal-wrapped log cuts them
// anywhere, a word or a number included.
func (st *scanState) continueWrap(raw []byte, ln *line, tb tbResult) {
	w := &st.wrap
	if !isBareContinuation(raw, ln, tb) || w.msgs[0] == "" || w.lines >= maxWrapLines || len(w.msgs[1])+len(ln.msg) >= maxWrapBytes {
		st.startWrap(ln, tb)
		return
	}
	w.msgs[0] += ln.msg
	w.msgs[1] += " " + ln.msg
	w.lines++
	w.hit = append(w.hit, st.pending...)
	ps := st.proc(w.proc)
	for _, joined := range w.msgs {
		found := st.newNeedles(joined, w.hit)
		w.hit = append(w.hit, found...)
		jl := *ln
		jl.msg, jl.proc = joined, w.proc
		for _, mi := range found {
			st.seen[mi] = ln.n
			st.apply(&matchers[mi], mi, &jl, ps)
		}
	}
}

// startWrap makes ln the message later bare lines may continue.
func (st *scanState) startWrap(ln *line, tb tbResult) {
	w := &st.wrap
	w.msgs, w.proc, w.lines, w.hit = [2]string{}, ln.proc, 1, append(w.hit[:0], st.pending...)
	if tb != tbInterior && len(ln.msg) >= minWrapBytes && len(ln.msg) <= maxWrapBytes {
		w.msgs = [2]string{ln.msg, ln.msg}
	}
}

// newNeedles returns, in table order, the matchers whose needles s
// contains and that are not in have.
func (st *scanState) newNeedles(s string, have []int) []int {
	var out []int
	needleAC.scan(s, func(id int32) {
		mi := acNeedleOf[id]
		if !slices.Contains(have, mi) && !slices.Contains(out, mi) {
			out = append(out, mi)
		}
	})
	slices.Sort(out)
	return out
}

// isBareContinuation: a line with no process prefix, no log header and no
// traceback role, that is not indented code, can only be the rest of the
// line before it.
func isBareContinuation(raw []byte, ln *line, tb tbResult) bool {
	if tb != tbNone || ln.proc.kind != 0 || ln.level != vllmlog.LevelNone || ln.msg == "" {
		return false
	}
	// One leading space is a wrap that fell before a space; more is code
	// or an indented block.
	if len(raw) > 1 && (raw[0] == ' ' || raw[0] == '\t') && (raw[1] == ' ' || raw[1] == '\t') {
		return false
	}
	return !strings.HasPrefix(ln.msg, tracebackHead)
}

// apply runs one matcher whose needle the line contains.
func (st *scanState) apply(m *matcher, mi int, ln *line, ps *procState) {
	if m.phase > ps.phase {
		ps.phase = m.phase
	}
	if m.flags&mCrash != 0 {
		st.crash = true
		return
	}
	if m.flags&mShutdown != 0 {
		if st.shutdownLine == 0 {
			st.shutdownLine = ln.n
		}
		return
	}
	if m.family == "" {
		var rej []Rejection
		for i := range m.res {
			m.res[i].extract(ln.msg, ln.n, &st.general, &rej)
		}
		st.addRejections(rej)
		return
	}
	if st.hitCount[mi] >= maxHitsPerMatcher {
		return
	}
	h := hit{m: m, family: m.family, line: ln.n, proc: ln.proc, phase: ps.phase, exc: -1}
	var rej []Rejection
	for i := range m.res {
		if !m.res[i].extract(ln.msg, ln.n, &h.v, &rej) && !m.res[i].optional {
			return
		}
	}
	st.addRejections(rej)
	if ps.lastExc >= 0 && st.exceptions[ps.lastExc].line >= ln.n-assocWindow {
		h.exc = ps.lastExc
	}
	st.hitCount[mi]++
	st.hits = append(st.hits, h)
	st.general.overlay(&h.v)
}

func (st *scanState) addRejections(r []Rejection) {
	for _, x := range r {
		if len(st.rejected) < maxRejections {
			st.rejected = append(st.rejected, x)
		}
	}
}

// flushOpenTracebacks reads the tracebacks the log ended inside (a paste
// cut before the exception line): where the innermost frame's statement
// is a raise, its class and string literals stand for the exception the
// log does not show, and the matchers read that message. Processes are
// taken in key order, so the result does not depend on map order.
func (st *scanState) flushOpenTracebacks() {
	keys := make([]procKey, 0, len(st.procs))
	for k, ps := range st.procs {
		if ps.tb != nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b procKey) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return cmp.Compare(a.id, b.id)
	})
	for _, k := range keys {
		ps := st.procs[k]
		exc, ok := ps.tb.openRaise(k, ps.phase)
		ps.tb = nil
		if !ok || len(st.exceptions) >= maxExceptions {
			continue
		}
		st.exceptions = append(st.exceptions, exc)
		ps.lastExc = len(st.exceptions) - 1
		st.scanText(exc.raise, &line{n: exc.line, proc: k, level: vllmlog.LevelError}, ps)
	}
}
