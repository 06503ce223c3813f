package diagnose

import (
	"cmp"
	"slices"
	"strings"
)

// finish picks the failure the scan saw and builds the Diagnosis.
func (st *scanState) finish(hw hardware) Diagnosis {
	st.resolveOOM()
	d := Diagnosis{Rejected: []Rejection{}, Evidence: []int{}}
	facts := st.general
	var evidence []int
	var fam Family
	var exc *exception
	best := st.best()
	switch {
	case best != nil:
		d.Status, fam, d.Wording = StatusRecognized, best.family, best.m.wording
		facts.overlay(&best.v)
		evidence = append(evidence, best.line)
		exc = st.exceptionFor(best)
	case len(st.exceptions) > 0 || st.firstError.line > 0 || st.crash:
		d.Status, fam = StatusUnrecognized, FamilyUnrecognized
		exc = st.rootCause()
		if exc == nil && st.firstError.line > 0 {
			evidence = append(evidence, st.firstError.line)
		}
	default:
		d.Status, fam = StatusNoFailure, FamilyUnrecognized
	}
	if exc != nil {
		evidence = append(evidence, exc.line)
		if exc.class != "" {
			facts[fExcClass] = val{set: true, line: exc.line, text: exc.class}
		}
		d.MessageTemplateDigest = templateDigest(exc.msg)
	}
	for i := range facts {
		if facts[i].set && facts[i].line > 0 {
			evidence = append(evidence, facts[i].line)
		}
	}
	san := sanitizer{hw: hw, family: fam}
	d.Family = fam
	d.Facts = san.sanitize(&facts)
	if d.Facts.EngineEra == nil && st.sawV1Module() {
		e := EraV1
		d.Facts.EngineEra = &e
	}
	d.Fingerprint = st.fingerprint(fam, d.Status, exc)
	d.FingerprintDigest, _ = d.Fingerprint.Digest()
	d.Rejected = sortedRejections(append(slices.Clone(st.rejected), san.rej...))
	d.Evidence = sortedLines(evidence)
	return d
}

// resolveOOM decides, for each CUDA out-of-memory hit, whether weights or
// graph capture ran out: by the call stack first, then by the phase the
// process was in. An OOM that is neither (a KV cache allocation, a
// request) is dropped rather than forced into either family.
func (st *scanState) resolveOOM() {
	kept := st.hits[:0]
	for _, h := range st.hits {
		if h.family == familyOOM {
			sigs, ph := sig(0), h.phase
			if h.exc >= 0 {
				sigs, ph = st.exceptions[h.exc].sigs, st.exceptions[h.exc].phase
			}
			switch {
			case sigs&sigCapture != 0, sigs&sigLoad == 0 && ph == phaseCapturing:
				h.family = FamilyOOMCUDAGraph
			case sigs&sigLoad != 0, ph == phaseLoading:
				h.family = FamilyOOMWeightLoad
			default:
				continue
			}
		}
		kept = append(kept, h)
	}
	st.hits = kept
}

// best returns the hit that names the failure: a strong hit before a weak
// one (a process that "died unexpectedly" is only a guess at the OOM
// killer; a stated engine death is not), then the family first in the
// taxonomy order; a hit on an exception before a bare log line, then the
// earliest line. A weak hit
// (a process that died unexpectedly) counts only when the log shows no
// root-cause exception, no native crash and no shutdown begun before it.
func (st *scanState) best() *hit {
	var best *hit
	weakOK := !st.crash && st.firstNonWrapper() == nil
	key := func(h *hit) []int {
		weak, bare := 0, 0
		if h.m.flags&mWeak != 0 {
			weak = 1
		}
		if h.exc < 0 {
			bare = 1
		}
		return []int{weak, h.family.rank(), bare, h.line}
	}
	for i := range st.hits {
		h := &st.hits[i]
		if h.m.flags&mWeak != 0 && (!weakOK || (st.shutdownLine > 0 && st.shutdownLine < h.line)) {
			continue
		}
		if best == nil || slices.Compare(key(h), key(best)) < 0 {
			best = h
		}
	}
	return best
}

// exceptionFor returns the exception whose class and call site the
// fingerprint of a hit takes: the hit's own, unless it only wraps a root
// cause; for a consequence family, the log's root cause.
func (st *scanState) exceptionFor(h *hit) *exception {
	spec := familySpecs[h.family]
	if h.exc >= 0 && !isWrapper(&st.exceptions[h.exc]) && !spec.consequence {
		return &st.exceptions[h.exc]
	}
	if spec.consequence {
		if h.family == FamilyOOMKilled {
			return nil // a SIGKILL leaves no exception behind
		}
		if e := st.rootCause(); e != nil {
			return e
		}
	}
	if h.exc >= 0 {
		return &st.exceptions[h.exc]
	}
	return nil
}

// rootCause is the first exception that is not a wrapper, preferring one
// raised inside the engine package; failing both, the first exception.
func (st *scanState) rootCause() *exception {
	var first *exception
	for i := range st.exceptions {
		e := &st.exceptions[i]
		if isWrapper(e) {
			continue
		}
		if e.innermost() != "" {
			return e
		}
		if first == nil {
			first = e
		}
	}
	if first != nil {
		return first
	}
	if len(st.exceptions) > 0 {
		return &st.exceptions[0]
	}
	return nil
}

func (st *scanState) firstNonWrapper() *exception {
	for i := range st.exceptions {
		if !isWrapper(&st.exceptions[i]) {
			return &st.exceptions[i]
		}
	}
	return nil
}

func (st *scanState) sawV1Module() bool {
	for i := range st.exceptions {
		for _, m := range st.exceptions[i].modules {
			if strings.HasPrefix(m, "vllm.v1.") {
				return true
			}
		}
	}
	return false
}

// fingerprint builds the failure fingerprint. A recognized family folds
// its known V0/V1 classes and call sites into one spelling; with no
// traceback, the matched wording is itself a known call site, and the
// family's canonical module stands for it.
func (st *scanState) fingerprint(fam Family, status Status, exc *exception) Fingerprint {
	fp := Fingerprint{Family: fam}
	var class, module string
	if exc != nil {
		class = exc.class
		module = exc.innermost()
	}
	if status == StatusRecognized {
		spec := familySpecs[fam]
		class = spec.canonicalClass(class)
		module = spec.canonicalModule(module)
	} else if module == "" {
		switch {
		case exc != nil:
			module = exc.file
		case st.firstError.line > 0:
			module = st.firstError.file
		}
	}
	if class != "" {
		if c, ok := ParseExceptionClass(class); ok {
			fp.ExceptionClass = &c
		}
	}
	if module != "" {
		if m, ok := ParseModule(module); ok {
			fp.CallSiteModule = &m
		}
	}
	return fp
}

func sortedRejections(r []Rejection) []Rejection {
	slices.SortFunc(r, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Reason, b.Reason))
	})
	return compactCapped(r, maxRejections)
}

func sortedLines(l []int) []int {
	slices.Sort(l)
	return compactCapped(l, maxEvidence)
}

// compactCapped drops repeats from sorted s and keeps at most max of them;
// never nil, so the record writes [].
func compactCapped[T comparable](s []T, max int) []T {
	s = slices.Compact(s)
	if len(s) > max {
		s = s[:max]
	}
	return nonNil(s)
}
