package diagnose

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// The facts of vLLM's memory-accounting lines. Their wordings, regexps and
// vLLM sources are vllmlog's (the one table, which evidence/memory reads
// too); what diagnose owns is which of those lines it reads, the Facts
// field each figure fills, and the start-up phase a line proves.

// memoryFact is one vllmlog pattern diagnose reads.
type memoryFact struct {
	id     vllmlog.PatternID
	fields map[vllmlog.Target]fieldID // captures of other targets are not read
	phase  phase                      // phaseNone: the line moves no phase
}

var memoryFacts = []memoryFact{
	{vllmlog.PatV0ProfileRestKV, map[vllmlog.Target]fieldID{vllmlog.TargetAvailableKV: fKVAvailable}, phaseNone},
	{vllmlog.PatV0ResultsKVCacheSize, map[vllmlog.Target]fieldID{vllmlog.TargetAvailableKV: fKVAvailable}, phaseNone},
	{vllmlog.PatModelLoadingTook, map[vllmlog.Target]fieldID{vllmlog.TargetWeights: fWeights}, phaseLoaded},
	{vllmlog.PatV0LoadingWeights, map[vllmlog.Target]fieldID{vllmlog.TargetWeights: fWeights}, phaseLoaded},
	{vllmlog.PatV1AvailableKV, map[vllmlog.Target]fieldID{vllmlog.TargetAvailableKV: fKVAvailable}, phaseNone},
	{vllmlog.PatV1KVCacheSize, map[vllmlog.Target]fieldID{vllmlog.TargetKVTokens: fKVTokens}, phaseNone},
	{vllmlog.PatV0Blocks, map[vllmlog.Target]fieldID{vllmlog.TargetBlocks: fBlocks}, phaseNone},
	{vllmlog.PatV0ProfileTotal, map[vllmlog.Target]fieldID{vllmlog.TargetTotal: fTotal}, phaseNone},
	{vllmlog.PatV0ProfileRequested, map[vllmlog.Target]fieldID{vllmlog.TargetUtil: fUtil, vllmlog.TargetRequested: fRequested}, phaseNone},
	{vllmlog.PatGraphCaptured, map[vllmlog.Target]fieldID{vllmlog.TargetGraphActual: fGraph}, phaseCaptured},
	{vllmlog.PatV1GraphEstimated, map[vllmlog.Target]fieldID{vllmlog.TargetGraphEstimate: fGraph}, phaseNone},
	{vllmlog.PatV1FreeOnStartup, map[vllmlog.Target]fieldID{vllmlog.TargetFree: fFree, vllmlog.TargetTotal: fTotal}, phaseNone},
	{vllmlog.PatV1DesiredUtil, map[vllmlog.Target]fieldID{vllmlog.TargetUtil: fUtil, vllmlog.TargetRequested: fRequested}, phaseNone},
}

// memoryMatchers turns memoryFacts into facts matchers: the pattern's
// needle and regexp, its captures on diagnose's fields.
func memoryMatchers() []matcher {
	out := make([]matcher, 0, len(memoryFacts))
	for _, f := range memoryFacts {
		p, ok := vllmlog.MemoryPattern(f.id)
		if !ok {
			panic(fmt.Sprintf("diagnose: vllmlog has no memory pattern %q", f.id))
		}
		r := rx{re: p.Re, optional: true}
		for _, c := range p.Caps {
			if fid, ok := f.fields[c.Target]; ok {
				r.caps = append(r.caps, logCapture(p, c, fid))
			}
		}
		out = append(out, matcher{wording: wordFacts, needles: []string{p.Needle}, res: []rx{r}, phase: f.phase})
	}
	return out
}

// logCapture is a vllmlog capture as a diagnose capture of field f.
func logCapture(p vllmlog.Pattern, c vllmlog.Capture, f fieldID) capture {
	switch c.Kind {
	case vllmlog.KindMemory:
		k := ckLogMem
		if p.GBIsGiB {
			k = ckLogMemGB
		}
		return capture{group: c.Num, unit: c.Unit, field: f, kind: k}
	case vllmlog.KindCount:
		return capture{group: c.Num, field: f, kind: ckCount}
	case vllmlog.KindRatio:
		return capture{group: c.Num, field: f, kind: ckRatio}
	}
	panic(fmt.Sprintf("diagnose: pattern %s: capture kind %d has no Facts reading", p.ID, c.Kind))
}
