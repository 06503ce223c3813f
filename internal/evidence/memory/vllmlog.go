package memory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// The vLLM startup-log parser builds Observations from a log, one per
// worker. It follows the log sanitization contract (ADR-006 §9, §14;
// reference/evidence.md §2.12): only typed numbers and closed enums leave
// it — byte counts, token and block counts, ratios, booleans and pattern
// identifiers. No string read from the log is kept, so nothing a log says
// can reach a rendered command. Every value is range-checked (and checked
// against the device's memory when it is known); a value that fails is
// rejected with a typed reason and the figure stays unknown.
//
// Workers are told apart by the process prefix vLLM puts on worker lines
// ("(VllmWorker rank=1 pid=12)", "(Worker_TP1 pid=…)", "(RayWorkerWrapper
// pid=…)", "(EngineCore_DP0 pid=…)"); unprefixed lines belong to the main
// process, and a line with neither a prefix nor a level is a continuation
// of the line before it. Engine-wide figures (KV tokens, blocks,
// concurrency — vLLM's minimum over the workers) are given to every worker
// of that engine whose startup precedes them. When a figure is logged more
// than once for a worker, the finer resolution wins, and at equal
// resolution the later line (the last startup in the log).

// VLLMLogOptions bound what the parser accepts.
type VLLMLogOptions struct {
	// GPUTotalBytes is the device's total memory when known: values larger
	// than it are rejected, and the observations are validated against it.
	GPUTotalBytes *int64
}

// RejectReason says why a logged value was not used.
type RejectReason string

// Reject reasons.
const (
	RejectMalformed     RejectReason = "malformed_number"
	RejectOutOfRange    RejectReason = "out_of_range"
	RejectExceedsDevice RejectReason = "exceeds_device_memory"
	RejectUnknownUnit   RejectReason = "unknown_unit"
)

// Rejection is one logged value the parser refused.
type Rejection struct {
	Line    int          `json:"line"`
	Pattern PatternID    `json:"pattern"`
	Field   string       `json:"field"`
	Reason  RejectReason `json:"reason"`
}

// StartupLog is what a vLLM log says about memory: one observation per
// worker, in a fixed order (data-parallel rank, rank, pipeline rank,
// tensor rank; unknown after known; then order of appearance).
type StartupLog struct {
	Observations []Observation `json:"observations"`
	Rejected     []Rejection   `json:"rejected"`
	Lines        int           `json:"lines"`
}

// ErrNoMemoryLines is returned for a log with no recognised memory line.
var ErrNoMemoryLines = errors.New("vllm log: no memory line recognised (looked for \"Model loading took\", \"Available KV cache memory\", \"GPU KV cache size\", \"# GPU blocks\", \"Memory profiling\"…); is this a vLLM startup log?")

// vlogHeadLen is how far into a line the level word and the process
// prefix are looked for.
const vlogHeadLen = 256

// vlogMaxLine bounds what is kept of one line: memory lines are short, and
// a multi-megabyte config dump must not cost memory.
const vlogMaxLine = 64 << 10

// ParseVLLMLog reads a vLLM startup log and returns its observations. It
// fails when no memory line is recognised, when the reader fails, or when
// an observation built from the log is inconsistent (Observation.Validate):
// such a log mixes figures that cannot belong to one startup.
func ParseVLLMLog(r io.Reader, opt VLLMLogOptions) (StartupLog, error) {
	p := newVlogParser(opt)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := vlogReadLine(br)
		if len(line) > 0 || err == nil {
			p.line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return StartupLog{}, fmt.Errorf("vllm log: line %d: %w", p.n, err)
		}
	}
	return p.finish()
}

// vlogReadLine returns the next line without its terminator, truncated to
// vlogMaxLine bytes (the rest of an overlong line is skipped).
func vlogReadLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(out) < vlogMaxLine {
			out = append(out, chunk[:min(len(chunk), vlogMaxLine-len(out))]...)
		}
		if err != nil || !isPrefix {
			return out, err
		}
	}
}

// vlogWorkerKey identifies a process: its pid, or the unprefixed main
// process.
type vlogWorkerKey struct {
	pid  int64
	main bool
}

// vlogFig is one figure as parsed.
type vlogFig struct {
	i     int64
	f     float64
	b     bool
	src   ObservationSource
	line  int
	isSet bool
}

type vlogWorker struct {
	key       vlogWorkerKey
	order     int // first appearance
	start     int // line of the latest startup (weights loaded), 0 if none
	lastLine  int
	figs      [vlogTargetCount]vlogFig
	rank      *int
	dp, pp    *int
	tp        *int
	hasWorker bool // printed at least one worker-level figure
}

type vlogEngineFigs struct {
	figs [vlogTargetCount]vlogFig
}

type vlogParser struct {
	opt      VLLMLogOptions
	n        int
	workers  map[vlogWorkerKey]*vlogWorker
	engines  map[int]*vlogEngineFigs // by data-parallel rank; -1 = not named
	cur      vlogWorkerKey           // worker of the last line with a header
	curDebug bool
	rejected []Rejection
	matched  bool
}

func newVlogParser(opt VLLMLogOptions) *vlogParser {
	return &vlogParser{opt: opt, workers: map[vlogWorkerKey]*vlogWorker{}, engines: map[int]*vlogEngineFigs{}, cur: vlogWorkerKey{main: true}}
}

func (p *vlogParser) worker(k vlogWorkerKey) *vlogWorker {
	w, ok := p.workers[k]
	if !ok {
		w = &vlogWorker{key: k, order: len(p.workers)}
		p.workers[k] = w
	}
	return w
}

// line parses one log line.
func (p *vlogParser) line(raw []byte) {
	p.n++
	raw = bytes.TrimRight(raw, "\r")
	if bytes.IndexByte(raw, 0x1b) >= 0 {
		raw = vlogANSIRE.ReplaceAll(raw, nil)
	}
	s := string(raw)
	level := vlogLevelRE.FindStringSubmatchIndex(s[:min(len(s), vlogHeadLen)])
	key, name, hasPrefix, prefixEnd := vlogPrefix(s, level)
	switch {
	case hasPrefix:
		p.cur = key
		p.curDebug = level != nil && s[level[2]:level[3]] == "DEBUG"
	case level != nil:
		p.cur = vlogWorkerKey{main: true}
		p.curDebug = s[level[2]:level[3]] == "DEBUG"
	}
	// else: a continuation line keeps the worker and level of the line before
	w := p.worker(p.cur)
	w.lastLine = p.n
	if hasPrefix {
		w.applyName(name)
	}
	msg := s[prefixEnd:]
	p.identity(w, msg)
	for i := range vlogPatterns {
		pt := &vlogPatterns[i]
		if !strings.Contains(msg, pt.needle) {
			continue
		}
		sm := pt.re.FindStringSubmatch(msg)
		if sm == nil {
			continue
		}
		p.matched = true
		p.apply(w, pt, sm)
	}
}

// vlogPrefix finds the innermost process prefix — the last "(Name pid=N)"
// before the level word, or anywhere in the line's head when there is no
// level. It returns the name tokens (numbers and group letters only are
// used from them) and where the message after the prefix starts.
func vlogPrefix(s string, level []int) (vlogWorkerKey, []string, bool, int) {
	head := s[:min(len(s), vlogHeadLen)]
	if level != nil {
		head = s[:level[0]+1]
	}
	if !strings.Contains(head, " pid=") {
		return vlogWorkerKey{}, nil, false, 0
	}
	all := vlogPrefixRE.FindAllStringSubmatchIndex(head, -1)
	if all == nil {
		return vlogWorkerKey{}, nil, false, 0
	}
	last := all[len(all)-1]
	pid, err := strconv.ParseInt(head[last[6]:last[7]], 10, 64)
	if err != nil {
		return vlogWorkerKey{}, nil, false, 0
	}
	name := head[last[2]:last[3]] + head[last[4]:last[5]]
	return vlogWorkerKey{pid: pid}, vlogTokSplitRE.Split(name, -1), true, last[1]
}

// applyName reads rank coordinates from a prefix name. The Worker_ scheme
// [n1] names a group only when its size exceeds 1: a missing DP or PP group
// is rank 0 of a group of one, and a "Worker_TP3" name with no DP, PP or
// PCP group is rank 3 of a single-stage, single-replica engine. A bare
// "Worker" (the name before the groups exist) says nothing.
func (w *vlogWorker) applyName(tokens []string) {
	if len(tokens) == 0 {
		return
	}
	role := tokens[0]
	groups := map[string]int{}
	for _, t := range tokens[1:] {
		if m := vlogRankTokRE.FindStringSubmatch(t); m != nil {
			w.rank = vlogIntPtr(m[1])
			continue
		}
		if m := vlogNameTokRE.FindStringSubmatch(t); m != nil {
			g := m[1]
			if g == "" && strings.HasPrefix(role, "EngineCore") {
				g = "DP" // "EngineCore_0" names the data-parallel rank
			}
			if v, err := strconv.Atoi(m[2]); err == nil && g != "" {
				groups[g] = v
			}
		}
	}
	if v, ok := groups["DP"]; ok {
		w.dp = &v
	}
	if v, ok := groups["PP"]; ok {
		w.pp = &v
	}
	if v, ok := groups["TP"]; ok {
		w.tp = &v
	}
	if role == "Worker" && len(tokens) > 1 {
		_, dp := groups["DP"]
		_, pp := groups["PP"]
		_, pcp := groups["PCP"]
		if !pp {
			zero := 0
			w.pp = &zero
		}
		if !dp {
			zero := 0
			w.dp = &zero
		}
		if tp, ok := groups["TP"]; ok && !dp && !pp && !pcp && w.rank == nil {
			r := tp
			w.rank = &r
		}
	}
}

func vlogIntPtr(s string) *int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &v
}

// identity reads the rank-assignment lines [r1]. For the unprefixed main
// process they count only when the world has one rank: multiprocess
// workers print them before their prefix is set.
func (p *vlogParser) identity(w *vlogWorker, msg string) {
	if !strings.Contains(msg, " rank") && !strings.Contains(msg, "world_size=") {
		return
	}
	if m := vlogAssignRE.FindStringSubmatch(msg); m != nil {
		if !w.key.main || m[2] == "1" {
			w.rank, w.dp, w.pp, w.tp = vlogIntPtr(m[1]), vlogIntPtr(m[3]), vlogIntPtr(m[4]), vlogIntPtr(m[5])
		}
		return
	}
	if m := vlogWorldRE.FindStringSubmatch(msg); m != nil && (!w.key.main || m[1] == "1") {
		w.rank = vlogIntPtr(m[2])
	}
}

// apply stores a pattern's captures on the worker or its engine.
func (p *vlogParser) apply(w *vlogWorker, pt *vlogPattern, sm []string) {
	if pt.startup && w.start > 0 && w.figs[tgtWeights].isSet && w.figs[tgtWeights].line < p.n {
		// A second "weights loaded" line from the same process: a new
		// startup. Forget the earlier one's figures.
		w.figs = [vlogTargetCount]vlogFig{}
	}
	if pt.startup {
		w.start = p.n
	}
	var dst *[vlogTargetCount]vlogFig
	if pt.scope == vsEngine {
		dp := -1
		if w.dp != nil {
			dp = *w.dp
		}
		e, ok := p.engines[dp]
		if !ok {
			e = &vlogEngineFigs{}
			p.engines[dp] = e
		}
		dst = &e.figs
	} else {
		w.hasWorker = true
		dst = &w.figs
	}
	kind := SourceLogLine
	if p.curDebug {
		kind = SourceDebugLog
	}
	for _, c := range pt.caps {
		fig, rej := p.value(pt, c, sm)
		if rej != "" {
			p.rejected = append(p.rejected, Rejection{Line: p.n, Pattern: pt.id, Field: vlogTargetField[c.target], Reason: rej})
			continue
		}
		fig.src.Kind, fig.src.Pattern, fig.src.Note, fig.line, fig.isSet = kind, pt.id, c.note, p.n, true
		if old := dst[c.target]; !old.isSet || fig.src.Resolution <= old.src.Resolution {
			dst[c.target] = fig
		}
	}
}

// value converts one capture, range-checking it.
func (p *vlogParser) value(pt *vlogPattern, c vlogCapture, sm []string) (vlogFig, RejectReason) {
	var f vlogFig
	switch c.kind {
	case vkFlag:
		f.b = c.flag
		return f, ""
	case vkMemory:
		unit, ok := vlogUnitBytes(sm[c.unit], pt.gbIsGiB)
		if !ok {
			return f, RejectUnknownUnit
		}
		d, err := vlogParseDecimal(sm[c.num])
		if err != nil {
			return f, RejectMalformed
		}
		b, err := d.toBytes(unit)
		if err != nil {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = b, vlogResolution(unit, d.scale, c.round)
		return f, p.checkBytes(c.target, b)
	case vkBytes:
		b, err := strconv.ParseInt(sm[c.num], 10, 64)
		if err != nil {
			return f, RejectMalformed
		}
		if b > obsMaxBytes || b < -obsMaxBytes {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = b, 1
		return f, p.checkBytes(c.target, b)
	case vkCount:
		n, err := vlogParseCount(sm[c.num])
		if err != nil {
			return f, RejectMalformed
		}
		if c.target == tgtConcurrencyLen && n < 1 {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = n, 1
		return f, ""
	case vkRatio:
		v, scale, err := vlogParseRatio(sm[c.num])
		if err != nil {
			return f, RejectMalformed
		}
		if c.target == tgtUtil && !(v > 0 && v <= 1) {
			return f, RejectOutOfRange
		}
		f.f, f.src.Resolution = v, vlogResolution(1, scale, c.round)
		return f, ""
	}
	return f, RejectMalformed
}

// vlogSigned lists the targets that may be negative: vLLM logs negative
// KV budgets, negative non-torch increases and negative graph deltas.
var vlogSigned = map[vlogTarget]bool{tgtNonTorch: true, tgtGraphActual: true, tgtGraphEstimate: true, tgtAvailableKV: true, tgtSumNonKV: true, tgtSumPeakActivation: true, tgtSumWeightsNonTorch: true, tgtSumGraphSizing: true, tgtSumGraphPoolEstimate: true, tgtSumSuggestRequested: true, tgtSumSuggestDevice: true}

func (p *vlogParser) checkBytes(t vlogTarget, b int64) RejectReason {
	if b < 0 && !vlogSigned[t] {
		return RejectOutOfRange
	}
	if t == tgtTotal && b == 0 {
		return RejectOutOfRange
	}
	if dev := p.opt.GPUTotalBytes; dev != nil && obsAbs(b) > *dev+vlogGiB/100 {
		return RejectExceedsDevice
	}
	return ""
}

// finish turns the workers into observations.
func (p *vlogParser) finish() (StartupLog, error) {
	out := StartupLog{Rejected: p.rejected, Lines: p.n}
	if out.Rejected == nil {
		out.Rejected = []Rejection{}
	}
	if !p.matched {
		return out, ErrNoMemoryLines
	}
	ws := p.reporting()
	for _, w := range ws {
		o := p.observation(w)
		if err := o.Validate(p.opt.GPUTotalBytes); err != nil {
			return out, fmt.Errorf("vllm log: %w", err)
		}
		out.Observations = append(out.Observations, o)
	}
	return out, nil
}

// reporting returns the workers that printed worker-level figures, latest
// startup per named rank, sorted. A log with only engine-wide lines gives
// one observation of the main process.
func (p *vlogParser) reporting() []*vlogWorker {
	var ws []*vlogWorker
	for _, w := range p.workers {
		if w.hasWorker {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		ws = append(ws, p.worker(vlogWorkerKey{main: true}))
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].order < ws[j].order })
	// The same rank from two processes is two startups: keep the later.
	latest := map[[4]int]*vlogWorker{}
	var keep []*vlogWorker
	for _, w := range ws {
		if w.rank == nil {
			keep = append(keep, w)
			continue
		}
		k := [4]int{vlogOr(w.dp), *w.rank, vlogOr(w.pp), vlogOr(w.tp)}
		if old, ok := latest[k]; !ok || old.start <= w.start {
			latest[k] = w
		}
	}
	for _, w := range latest {
		keep = append(keep, w)
	}
	sort.Slice(keep, func(i, j int) bool { return vlogLess(keep[i], keep[j]) })
	return keep
}

func vlogOr(v *int) int {
	if v == nil {
		return -1
	}
	return *v
}

// vlogLess orders by dp, rank, pp, tp (unknown last), then appearance.
func vlogLess(a, b *vlogWorker) bool {
	for _, pair := range [][2]*int{{a.dp, b.dp}, {a.rank, b.rank}, {a.pp, b.pp}, {a.tp, b.tp}} {
		x, y := pair[0], pair[1]
		switch {
		case x == nil && y == nil:
			continue
		case x == nil:
			return false
		case y == nil:
			return true
		case *x != *y:
			return *x < *y
		}
	}
	return a.order < b.order
}

// engineFor picks the engine-wide figures for a worker: its data-parallel
// engine's, or the only engine's.
func (p *vlogParser) engineFor(w *vlogWorker) *vlogEngineFigs {
	if w.dp != nil {
		if e, ok := p.engines[*w.dp]; ok {
			return e
		}
	}
	if len(p.engines) == 1 {
		for _, e := range p.engines {
			return e
		}
	}
	return nil
}

// observation assembles one worker's Observation.
func (p *vlogParser) observation(w *vlogWorker) Observation {
	o := NewObservation()
	o.Rank, o.DPRank, o.PPRank, o.TPRank = w.rank, w.dp, w.pp, w.tp
	figs := w.figs
	if e := p.engineFor(w); e != nil {
		for t, f := range e.figs {
			if f.isSet && f.line >= w.start && !figs[t].isSet {
				figs[t] = f
			}
		}
	}
	vlogDeriveV0Peak(&figs)
	vlogDerivePeakActivation(&figs)
	for t, f := range figs {
		if f.isSet {
			o.set(vlogTarget(t), f)
		}
	}
	return o
}

// vlogDeriveV0Peak: V0.6.4/0.6.5 logged the allocator peak with the
// weights inside it; the torch peak increase is that peak minus the
// weights. Its resolution is the two figures' combined.
func vlogDeriveV0Peak(figs *[vlogTargetCount]vlogFig) {
	peak, wts := figs[tgtSumTorchPeak], figs[tgtWeights]
	if !peak.isSet || !wts.isSet || figs[tgtTransient].isSet || peak.i < wts.i {
		return
	}
	figs[tgtTransient] = vlogFig{
		i: peak.i - wts.i, line: peak.line, isSet: true,
		src: ObservationSource{Kind: SourceDerived, Pattern: PatV0ResultsDerivedPeak, Resolution: peak.src.Resolution + wts.src.Resolution, Note: NoteIncludesPersistent},
	}
}

// vlogDerivePeakActivation: vLLM's "… GiB for peak activation" is its
// peak_activation_memory. Where the engine applied a CUDA-graph estimate
// that attribute may include it (ADR-006), so it stays a cross-check; where
// the log shows no graph estimate at all, there is nothing for it to
// include and it is the torch peak increase, moved into the raw field.
func vlogDerivePeakActivation(figs *[vlogTargetCount]vlogFig) {
	pa := figs[tgtSumPeakActivation]
	applied := figs[tgtGraphApplied]
	if !pa.isSet || figs[tgtTransient].isSet || figs[tgtGraphEstimate].isSet || (applied.isSet && applied.b) {
		return
	}
	f := pa
	f.src.Note = NoteIncludesPersistent
	figs[tgtTransient] = f
	figs[tgtSumPeakActivation] = vlogFig{} // moved, not copied: no raw field duplicates a sum
}

// set stores a parsed figure on the observation.
func (o *Observation) set(t vlogTarget, f vlogFig) {
	i, fl, b := f.i, f.f, f.b
	ptr := map[vlogTarget]**int64{
		tgtTotal: &o.InitialTotalBytes, tgtFree: &o.InitialFreeBytes, tgtRequested: &o.RequestedBytes,
		tgtWeights: &o.ModelWeightBytes, tgtTransient: &o.TransientPeakBytes, tgtNonTorch: &o.NonTorchIncreaseBytes,
		tgtGraphEstimate: &o.CUDAGraphEstimateBytes, tgtGraphActual: &o.CUDAGraphActualBytes,
		tgtAvailableKV: &o.AvailableKVBytes, tgtKVTokens: &o.KVCacheSizeTokens, tgtBlocks: &o.NumGPUBlocks,
		tgtConcurrencyLen: &o.MaxConcurrencyTokens, tgtSumNonKV: &o.Sums.NonKVCacheBytes,
		tgtSumTorchPeak: &o.Sums.TorchPeakBytes, tgtSumPeakActivation: &o.Sums.PeakActivationBytes,
		tgtSumWeightsNonTorch: &o.Sums.WeightsPlusNonTorchBytes, tgtSumGraphSizing: &o.Sums.CUDAGraphSizingBytes,
		tgtSumGraphPoolEstimate: &o.Sums.CUDAGraphPoolEstimateBytes, tgtSumSuggestRequested: &o.Sums.SuggestedKVCacheRequestedBytes,
		tgtSumSuggestDevice: &o.Sums.SuggestedKVCacheDeviceBytes,
	}
	switch t {
	case tgtUtil:
		o.GPUMemoryUtilization = &fl
	case tgtConcurrency:
		o.MaxConcurrency = &fl
	case tgtGraphApplied:
		o.CUDAGraphEstimateApplied = &b
	default:
		*ptr[t] = &i
	}
	o.Sources[vlogTargetField[t]] = f.src
}
