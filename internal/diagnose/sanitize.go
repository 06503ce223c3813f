package diagnose

import "slices"

// Field names a Facts field, for rejections.
type Field string

// RejectReason says why a logged value was not kept.
type RejectReason string

// Reject reasons.
const (
	RejectMalformed       RejectReason = "malformed"             // not a number / not parseable
	RejectOutOfRange      RejectReason = "out_of_range"          // outside the field's schema range
	RejectExceedsDevice   RejectReason = "exceeds_device_memory" // larger than the GPU's total memory
	RejectInconsistent    RejectReason = "inconsistent"          // contradicts another fact (free > total, needed ≤ available…)
	RejectNotInEnum       RejectReason = "not_in_enum"           // outside the closed set
	RejectBadIdentifier   RejectReason = "invalid_identifier"    // not a valid identifier (or too long)
	RejectUnknownGPU      RejectReason = "gpu_not_in_table"      // a GPU name memory's table does not know
	RejectAboveModelLimit RejectReason = "above_model_limit"     // a max_model_len above the model config's limit
)

// Rejection is one logged value a diagnosis refused, and why.
type Rejection struct {
	Field  Field        `json:"field"`
	Reason RejectReason `json:"reason"`
	Line   int          `json:"line"` // 1-based line of the log
}

// hardware are the facts a log is checked against: the GPU the operator
// names (Options.GPU) and the model config's context limit.
type hardware struct {
	totalBytes  *int64
	cc          *ComputeCapability
	gpu         *GPUKey
	modelMaxLen *int64
}

// Schema ranges.
const (
	maxRecordInt   = 1 << 53
	maxTokens      = 1 << 30
	maxKVTokens    = 1 << 40
	maxBlocks      = 1 << 31
	maxParallel    = 1024
	maxHeads       = 1 << 16
	deviceSlackGiB = (1 << 30) / 100 // vLLM prints GiB to two decimals
)

// sanitizer turns candidates into Facts, keeping the reason for each one
// it refuses.
type sanitizer struct {
	hw     hardware
	family Family
	rej    []Rejection
}

func (s *sanitizer) reject(f fieldID, r RejectReason, v val) {
	s.rej = append(s.rej, Rejection{Field: fieldNames[f], Reason: r, Line: v.line})
}

// sanitize validates every candidate and builds the Facts.
func (s *sanitizer) sanitize(v *vals) Facts {
	var out Facts
	s.crossCheck(v)
	s.numbers(v, &out)
	out.ComputeCapability = s.capability(fCC, v[fCC], true)
	out.RequiredComputeCapability = s.capability(fReqCC, v[fReqCC], false)
	out.GPU = s.gpuKey(v[fGPU])
	out.DType = textFact(s, fDType, v[fDType], RejectNotInEnum, ParseDType)
	out.Quantization = textFact(s, fQuant, v[fQuant], RejectNotInEnum, ParseQuantMethod)
	out.ExceptionClass = textFact(s, fExcClass, v[fExcClass], RejectBadIdentifier, ParseExceptionClass)
	out.EngineVersion = s.version(v[fVersion])
	out.EngineEra = textFact(s, fEra, v[fEra], RejectNotInEnum, parseEra)
	out.Architecture = textFact(s, fArch, v[fArch], RejectBadIdentifier, ParseArchitecture)
	if x := v[fArchRegistered]; x.set && out.Architecture != nil {
		reg := x.i == 1
		out.ArchitectureRegistered = &reg
	}
	return out
}

// numbers validates the byte, fraction and integer candidates into out.
func (s *sanitizer) numbers(v *vals, out *Facts) {
	bytesFields := []struct {
		f      fieldID
		signed bool
		dst    **int64
	}{
		{fRequested, false, &out.RequestedMemoryBytes}, {fFree, false, &out.FreeMemoryBytes},
		{fTotal, false, &out.TotalMemoryBytes}, {fTried, false, &out.TriedToAllocateBytes},
		{fWeights, false, &out.WeightsBytes}, {fKVAvailable, true, &out.KVAvailableBytes},
		{fKVNeeded, false, &out.KVNeededBytes}, {fGraph, true, &out.CUDAGraphBytes},
		{fPTAllocated, false, &out.PyTorchAllocatedBytes},
	}
	for _, b := range bytesFields {
		if x, ok := s.bytes(b.f, b.signed, v[b.f]); ok {
			*b.dst = &x
		}
	}
	if x := v[fUtil]; x.set {
		if x.f > 0 && x.f <= 1 {
			out.GPUMemoryUtilization = &x.f
		} else {
			s.reject(fUtil, RejectOutOfRange, x)
		}
	}
	ints := []struct {
		f        fieldID
		min, max int64
		dst      **int64
	}{
		{fMaxLen, 1, maxTokens, &out.MaxModelLen}, {fDerivedMaxLen, 1, maxTokens, &out.DerivedMaxModelLen},
		{fKVTokens, 0, maxKVTokens, &out.KVCapacityTokens}, {fEstMaxLen, 1, maxTokens, &out.EstimatedMaxModelLen},
		{fBlocks, 0, maxBlocks, &out.NumGPUBlocks}, {fTP, 1, maxParallel, &out.TensorParallelSize},
		{fPP, 1, maxParallel, &out.PipelineParallelSize}, {fHeads, 1, maxHeads, &out.NumAttentionHeads},
		{fKVHeads, 1, maxHeads, &out.NumKVHeads}, {fPort, 1, 65535, &out.Port},
		{fHTTP, 100, 599, &out.HTTPStatus}, {fExit, -255, 255, &out.ExitCode}, {fSignal, 1, 64, &out.Signal},
	}
	for _, n := range ints {
		if x := v[n.f]; x.set {
			if x.i < n.min || x.i > n.max {
				s.reject(n.f, RejectOutOfRange, x)
				continue
			}
			i := x.i
			*n.dst = &i
		}
	}
}

// crossCheck rejects candidates that contradict each other or the model
// config before the per-field checks run.
func (s *sanitizer) crossCheck(v *vals) {
	if t := v[fTotal]; t.set {
		for _, f := range []fieldID{fFree, fRequested} {
			if x := v[f]; x.set && x.i > t.i+deviceSlackGiB {
				s.reject(f, RejectInconsistent, x)
				v[f] = val{}
			}
		}
	}
	if n, a := v[fKVNeeded], v[fKVAvailable]; n.set && a.set && n.line == a.line && n.i <= a.i {
		// the message says needed > available; a log that says otherwise
		// was not printed by vLLM
		s.reject(fKVNeeded, RejectInconsistent, n)
		v[fKVNeeded] = val{}
	}
	if e, m := v[fEstMaxLen], v[fMaxLen]; e.set && m.set && e.i >= m.i {
		s.reject(fEstMaxLen, RejectInconsistent, e)
		v[fEstMaxLen] = val{}
	}
	if m := v[fMaxLen]; m.set && s.hw.modelMaxLen != nil && m.i > *s.hw.modelMaxLen && s.family != FamilyMaxModelLen {
		s.reject(fMaxLen, RejectAboveModelLimit, m)
		v[fMaxLen] = val{}
	}
}

// bytes range-checks a byte figure, and bounds it by the device's memory.
func (s *sanitizer) bytes(f fieldID, signed bool, x val) (int64, bool) {
	if !x.set {
		return 0, false
	}
	if x.i > maxRecordInt || x.i < -maxRecordInt || (!signed && x.i < 0) {
		s.reject(f, RejectOutOfRange, x)
		return 0, false
	}
	if dev := s.hw.totalBytes; dev != nil {
		abs := x.i
		if abs < 0 {
			abs = -abs
		}
		if abs > *dev+deviceSlackGiB {
			s.reject(f, RejectExceedsDevice, x)
			return 0, false
		}
	}
	return x.i, true
}

func (s *sanitizer) capability(f fieldID, x val, device bool) *ComputeCapability {
	if !x.set {
		return nil
	}
	if !x.cc.Valid() {
		s.reject(f, RejectOutOfRange, x)
		return nil
	}
	if device && s.hw.cc != nil && *s.hw.cc != x.cc {
		s.reject(f, RejectInconsistent, x)
		return nil
	}
	cc := x.cc
	return &cc
}

func (s *sanitizer) gpuKey(x val) *GPUKey {
	if !x.set {
		return nil
	}
	g, ok := LookupGPUKey(x.text)
	if !ok {
		s.reject(fGPU, RejectUnknownGPU, x)
		return nil
	}
	if s.hw.gpu != nil && s.hw.gpu.String() != g.String() {
		s.reject(fGPU, RejectInconsistent, x)
		return nil
	}
	return &g
}

// absentText are the texts vLLM prints for a setting that is not set: no
// fact and no rejection.
var absentText = map[fieldID][]string{fDType: {"auto"}, fQuant: {"None", "none"}}

// textFact parses a text candidate, rejecting it for reason when parse
// refuses it.
func textFact[T any](s *sanitizer, f fieldID, x val, reason RejectReason, parse func(string) (T, bool)) *T {
	if !x.set || slices.Contains(absentText[f], x.text) {
		return nil
	}
	v, ok := parse(x.text)
	if !ok {
		s.reject(f, reason, x)
		return nil
	}
	return &v
}

func (s *sanitizer) version(x val) *EngineVersion {
	if !x.set {
		return nil
	}
	v := x.ver
	if v.Major > 99 || v.Minor > 999 || v.Patch > 999 {
		s.reject(fVersion, RejectOutOfRange, x)
		return nil
	}
	return &v
}

// parseEra reads the engine generation a log names.
func parseEra(text string) (EngineEra, bool) {
	switch text {
	case "V1", "v1":
		return EraV1, true
	case "V0", "v0", "": // "Initializing an LLM engine (v0.6.3)" predates V1
		return EraV0, true
	}
	return "", false
}
