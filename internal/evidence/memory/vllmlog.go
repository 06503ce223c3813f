package memory

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
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

// ParseVLLMLog reads a vLLM startup log and returns its observations. It
// fails when no memory line is recognised, when the reader fails, or when
// an observation built from the log is inconsistent (Observation.Validate):
// such a log mixes figures that cannot belong to one startup.
func ParseVLLMLog(r io.Reader, opt VLLMLogOptions) (StartupLog, error) {
	p := newVlogParser(opt)
	lr := vllmlog.NewReader(r, vllmlog.MaxLine)
	for {
		line, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return StartupLog{}, fmt.Errorf("vllm log: line %d: %w", p.n+1, err)
		}
		p.line(line)
	}
	return p.finish()
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
	key      vlogWorkerKey
	order    int // first appearance
	start    int // line of the latest startup (weights loaded), 0 if none
	lastLine int
	figs     [vllmlog.TargetCount]vlogFig
	vllmlog.Ranks
	hasWorker bool // printed at least one worker-level figure
}

type vlogEngineFigs struct {
	figs [vllmlog.TargetCount]vlogFig
}

type vlogParser struct {
	opt      VLLMLogOptions
	patterns []vllmlog.Pattern
	n        int
	workers  map[vlogWorkerKey]*vlogWorker
	engines  map[int]*vlogEngineFigs // by data-parallel rank; -1 = not named
	cur      vlogWorkerKey           // worker of the last line with a header
	curDebug bool
	rejected []Rejection
	matched  bool
}

func newVlogParser(opt VLLMLogOptions) *vlogParser {
	return &vlogParser{opt: opt, patterns: vllmlog.MemoryPatterns(), workers: map[vlogWorkerKey]*vlogWorker{}, engines: map[int]*vlogEngineFigs{}, cur: vlogWorkerKey{main: true}}
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
	s := string(vllmlog.StripANSI(raw))
	h := vllmlog.ReadHead(s)
	switch {
	case h.HasPrefix:
		p.cur = vlogWorkerKey{pid: h.PID}
		p.curDebug = h.Level == "DEBUG"
	case h.Level != "":
		p.cur = vlogWorkerKey{main: true}
		p.curDebug = h.Level == "DEBUG"
	}
	// else: a continuation line keeps the worker and level of the line before
	w := p.worker(p.cur)
	w.lastLine = p.n
	if h.HasPrefix {
		vllmlog.WorkerName(h.Name, &w.Ranks)
	}
	msg := s[h.MsgStart:]
	p.identity(w, msg)
	for i := range p.patterns {
		pt := &p.patterns[i]
		if !strings.Contains(msg, pt.Needle) {
			continue
		}
		sm := pt.Re.FindStringSubmatch(msg)
		if sm == nil {
			continue
		}
		p.matched = true
		p.apply(w, pt, sm)
	}
}

// identity reads the rank-assignment lines [r1]. For the unprefixed main
// process they count only when the world has one rank: multiprocess
// workers print them before their prefix is set.
func (p *vlogParser) identity(w *vlogWorker, msg string) {
	r, world, ok := vllmlog.RankLine(msg)
	if !ok || (w.key.main && world != "1") {
		return
	}
	if r.DP != nil { // the assignment line states every coordinate
		w.Ranks = r
		return
	}
	w.Rank = r.Rank
}

// apply stores a pattern's captures on the worker or its engine.
func (p *vlogParser) apply(w *vlogWorker, pt *vllmlog.Pattern, sm []string) {
	if pt.Startup && w.start > 0 && w.figs[vllmlog.TargetWeights].isSet && w.figs[vllmlog.TargetWeights].line < p.n {
		// A second "weights loaded" line from the same process: a new
		// startup. Forget the earlier one's figures.
		w.figs = [vllmlog.TargetCount]vlogFig{}
	}
	if pt.Startup {
		w.start = p.n
	}
	var dst *[vllmlog.TargetCount]vlogFig
	if pt.Engine {
		dp := -1
		if w.DP != nil {
			dp = *w.DP
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
	for _, c := range pt.Caps {
		fig, rej := p.value(pt, c, sm)
		if rej != "" {
			p.rejected = append(p.rejected, Rejection{Line: p.n, Pattern: pt.ID, Field: vlogTargetField[c.Target], Reason: rej})
			continue
		}
		fig.src.Kind, fig.src.Pattern, fig.src.Note, fig.line, fig.isSet = kind, pt.ID, c.Note, p.n, true
		if old := dst[c.Target]; !old.isSet || fig.src.Resolution <= old.src.Resolution {
			dst[c.Target] = fig
		}
	}
}

// value converts one capture, range-checking it.
func (p *vlogParser) value(pt *vllmlog.Pattern, c vllmlog.Capture, sm []string) (vlogFig, RejectReason) {
	var f vlogFig
	switch c.Kind {
	case vllmlog.KindFlag:
		f.b = c.Flag
		return f, ""
	case vllmlog.KindMemory:
		unit, ok := vllmlog.UnitBytes(sm[c.Unit], pt.GBIsGiB)
		if !ok {
			return f, RejectUnknownUnit
		}
		d, err := vllmlog.ParseDecimal(sm[c.Num])
		if err != nil {
			return f, RejectMalformed
		}
		b, err := d.Bytes(unit)
		if err != nil {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = b, vllmlog.Resolution(unit, d.Scale, c.Round)
		return f, p.checkBytes(c.Target, b)
	case vllmlog.KindBytes:
		b, err := strconv.ParseInt(sm[c.Num], 10, 64)
		if err != nil {
			return f, RejectMalformed
		}
		if b > obsMaxBytes || b < -obsMaxBytes {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = b, 1
		return f, p.checkBytes(c.Target, b)
	case vllmlog.KindCount:
		n, err := vllmlog.ParseCount(sm[c.Num])
		if err != nil {
			return f, RejectMalformed
		}
		if c.Target == vllmlog.TargetConcurrencyLen && n < 1 {
			return f, RejectOutOfRange
		}
		f.i, f.src.Resolution = n, 1
		return f, ""
	case vllmlog.KindRatio:
		v, scale, err := vllmlog.ParseRatio(sm[c.Num])
		if err != nil {
			return f, RejectMalformed
		}
		if c.Target == vllmlog.TargetUtil && !(v > 0 && v <= 1) {
			return f, RejectOutOfRange
		}
		f.f, f.src.Resolution = v, vllmlog.Resolution(1, scale, c.Round)
		return f, ""
	}
	return f, RejectMalformed
}

// vlogTargetField names each target's Observation field.
var vlogTargetField = [vllmlog.TargetCount]string{
	vllmlog.TargetTotal: FieldInitialTotal, vllmlog.TargetFree: FieldInitialFree, vllmlog.TargetRequested: FieldRequested,
	vllmlog.TargetUtil: FieldUtilization, vllmlog.TargetWeights: FieldModelWeight, vllmlog.TargetTransient: FieldTransientPeak,
	vllmlog.TargetNonTorch: FieldNonTorchIncrease, vllmlog.TargetGraphEstimate: FieldCUDAGraphEstimate,
	vllmlog.TargetGraphApplied: FieldCUDAGraphApplied, vllmlog.TargetGraphActual: FieldCUDAGraphActual,
	vllmlog.TargetAvailableKV: FieldAvailableKV, vllmlog.TargetKVTokens: FieldKVCacheTokens, vllmlog.TargetBlocks: FieldNumGPUBlocks,
	vllmlog.TargetConcurrency: FieldMaxConcurrency, vllmlog.TargetConcurrencyLen: FieldMaxConcurrencyLen,
	vllmlog.TargetSumNonKV: SumNonKVCache, vllmlog.TargetSumTorchPeak: SumTorchPeak, vllmlog.TargetSumPeakActivation: SumPeakActivation,
	vllmlog.TargetSumWeightsNonTorch: SumWeightsPlusNonTorch, vllmlog.TargetSumGraphSizing: SumCUDAGraphSizing,
	vllmlog.TargetSumGraphPoolEstimate: SumCUDAGraphPoolEstimate, vllmlog.TargetSumSuggestRequested: SumSuggestedKVRequested,
	vllmlog.TargetSumSuggestDevice: SumSuggestedKVDevice,
}

// vlogSigned lists the targets that may be negative: vLLM logs negative
// KV budgets, negative non-torch increases and negative graph deltas.
var vlogSigned = map[vllmlog.Target]bool{vllmlog.TargetNonTorch: true, vllmlog.TargetGraphActual: true, vllmlog.TargetGraphEstimate: true, vllmlog.TargetAvailableKV: true, vllmlog.TargetSumNonKV: true, vllmlog.TargetSumPeakActivation: true, vllmlog.TargetSumWeightsNonTorch: true, vllmlog.TargetSumGraphSizing: true, vllmlog.TargetSumGraphPoolEstimate: true, vllmlog.TargetSumSuggestRequested: true, vllmlog.TargetSumSuggestDevice: true}

func (p *vlogParser) checkBytes(t vllmlog.Target, b int64) RejectReason {
	if b < 0 && !vlogSigned[t] {
		return RejectOutOfRange
	}
	if t == vllmlog.TargetTotal && b == 0 {
		return RejectOutOfRange
	}
	if dev := p.opt.GPUTotalBytes; dev != nil && obsAbs(b) > *dev+vllmlog.GiB/100 {
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
		if w.Rank == nil {
			keep = append(keep, w)
			continue
		}
		k := [4]int{vlogOr(w.DP), *w.Rank, vlogOr(w.PP), vlogOr(w.TP)}
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
	for _, pair := range [][2]*int{{a.DP, b.DP}, {a.Rank, b.Rank}, {a.PP, b.PP}, {a.TP, b.TP}} {
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
	if w.DP != nil {
		if e, ok := p.engines[*w.DP]; ok {
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
	o.Rank, o.DPRank, o.PPRank, o.TPRank = w.Rank, w.DP, w.PP, w.TP
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
			o.set(vllmlog.Target(t), f)
		}
	}
	return o
}

// vlogDeriveV0Peak: V0.6.4/0.6.5 logged the allocator peak with the
// weights inside it; the torch peak increase is that peak minus the
// weights. Its resolution is the two figures' combined.
func vlogDeriveV0Peak(figs *[vllmlog.TargetCount]vlogFig) {
	peak, wts := figs[vllmlog.TargetSumTorchPeak], figs[vllmlog.TargetWeights]
	if !peak.isSet || !wts.isSet || figs[vllmlog.TargetTransient].isSet || peak.i < wts.i {
		return
	}
	figs[vllmlog.TargetTransient] = vlogFig{
		i: peak.i - wts.i, line: peak.line, isSet: true,
		src: ObservationSource{Kind: SourceDerived, Pattern: vllmlog.PatV0ResultsDerivedPeak, Resolution: peak.src.Resolution + wts.src.Resolution, Note: vllmlog.NoteIncludesPersistent},
	}
}

// vlogDerivePeakActivation: vLLM's "… GiB for peak activation" is its
// peak_activation_memory. Where the engine applied a CUDA-graph estimate
// that attribute may include it (ADR-006), so it stays a cross-check; where
// the log shows no graph estimate at all, there is nothing for it to
// include and it is the torch peak increase, moved into the raw field.
func vlogDerivePeakActivation(figs *[vllmlog.TargetCount]vlogFig) {
	pa := figs[vllmlog.TargetSumPeakActivation]
	applied := figs[vllmlog.TargetGraphApplied]
	if !pa.isSet || figs[vllmlog.TargetTransient].isSet || figs[vllmlog.TargetGraphEstimate].isSet || (applied.isSet && applied.b) {
		return
	}
	f := pa
	f.src.Note = vllmlog.NoteIncludesPersistent
	figs[vllmlog.TargetTransient] = f
	figs[vllmlog.TargetSumPeakActivation] = vlogFig{} // moved, not copied: no raw field duplicates a sum
}

// set stores a parsed figure on the observation.
func (o *Observation) set(t vllmlog.Target, f vlogFig) {
	i, fl, b := f.i, f.f, f.b
	ptr := map[vllmlog.Target]**int64{
		vllmlog.TargetTotal: &o.InitialTotalBytes, vllmlog.TargetFree: &o.InitialFreeBytes, vllmlog.TargetRequested: &o.RequestedBytes,
		vllmlog.TargetWeights: &o.ModelWeightBytes, vllmlog.TargetTransient: &o.TransientPeakBytes, vllmlog.TargetNonTorch: &o.NonTorchIncreaseBytes,
		vllmlog.TargetGraphEstimate: &o.CUDAGraphEstimateBytes, vllmlog.TargetGraphActual: &o.CUDAGraphActualBytes,
		vllmlog.TargetAvailableKV: &o.AvailableKVBytes, vllmlog.TargetKVTokens: &o.KVCacheSizeTokens, vllmlog.TargetBlocks: &o.NumGPUBlocks,
		vllmlog.TargetConcurrencyLen: &o.MaxConcurrencyTokens, vllmlog.TargetSumNonKV: &o.Sums.NonKVCacheBytes,
		vllmlog.TargetSumTorchPeak: &o.Sums.TorchPeakBytes, vllmlog.TargetSumPeakActivation: &o.Sums.PeakActivationBytes,
		vllmlog.TargetSumWeightsNonTorch: &o.Sums.WeightsPlusNonTorchBytes, vllmlog.TargetSumGraphSizing: &o.Sums.CUDAGraphSizingBytes,
		vllmlog.TargetSumGraphPoolEstimate: &o.Sums.CUDAGraphPoolEstimateBytes, vllmlog.TargetSumSuggestRequested: &o.Sums.SuggestedKVCacheRequestedBytes,
		vllmlog.TargetSumSuggestDevice: &o.Sums.SuggestedKVCacheDeviceBytes,
	}
	switch t {
	case vllmlog.TargetUtil:
		o.GPUMemoryUtilization = &fl
	case vllmlog.TargetConcurrency:
		o.MaxConcurrency = &fl
	case vllmlog.TargetGraphApplied:
		o.CUDAGraphEstimateApplied = &b
	default:
		*ptr[t] = &i
	}
	o.Sources[vlogTargetField[t]] = f.src
}
