package memory

import (
	"math"

	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// Compare puts a Prediction next to what a startup log observed, figure by
// figure, with the error of each: `narwhal plan --compare-log LOG`. It is
// pure and deterministic. A figure either side does not know is reported
// as unknown — never compared against a stand-in value.

// Figure names one compared quantity.
type Figure string

// Figures, in the order Compare reports them.
const (
	FigRequested         Figure = "requested"          // ceil(total × gpu_memory_utilization)
	FigWeights           Figure = "weights"            // weight bytes of the rank
	FigActivationPeak    Figure = "activation_peak"    // torch peak increase of the profile run
	FigNonTorch          Figure = "non_torch"          // non-torch increase
	FigCUDAGraphEstimate Figure = "cudagraph_estimate" // predicted graph memory vs vLLM's estimate
	FigCUDAGraphActual   Figure = "cudagraph_actual"   // predicted graph memory vs the captured graphs
	FigAvailableKV       Figure = "available_kv"       // KV-cache budget
	FigKVTokens          Figure = "kv_tokens"          // "GPU KV cache size: N tokens"
	FigGPUBlocks         Figure = "gpu_blocks"
	FigMaxConcurrency    Figure = "max_concurrency" // at the logged tokens per request
)

// FigureUnit is the unit of a figure's values.
type FigureUnit string

// Units.
const (
	UnitBytes  FigureUnit = "bytes"
	UnitTokens FigureUnit = "tokens"
	UnitBlocks FigureUnit = "blocks"
	UnitRatio  FigureUnit = "ratio"
)

// CompareReason says why a figure was not compared, or qualifies it.
type CompareReason string

// Compare reasons.
const (
	ReasonNone             CompareReason = "none"
	ReasonPredictedUnknown CompareReason = "predicted_unknown"
	ReasonLoggedUnknown    CompareReason = "logged_unknown"
	ReasonBothUnknown      CompareReason = "both_unknown"
	ReasonContextDiffers   CompareReason = "context_differs" // the log's concurrency is for another tokens-per-request
	ReasonLoggedZero       CompareReason = "logged_zero"     // compared, but a relative error of a 0 is undefined
)

// FigureError is one row of the comparison. Errors are predicted − logged
// (Apron's sign convention); RelError divides by |logged|. WithinBand
// tells whether the logged value lies in the predicted band widened by the
// log's resolution.
type FigureError struct {
	Figure           Figure        `json:"figure"`
	Unit             FigureUnit    `json:"unit"`
	Compared         bool          `json:"compared"`
	Reason           CompareReason `json:"reason"`
	PredictedStatus  string        `json:"predicted_status"` // the component's status: derived, predicted, unknown
	PredictedReason  string        `json:"predicted_reason"` // the calculator's reason when unknown
	Predicted        *float64      `json:"predicted"`
	PredictedLower   *float64      `json:"predicted_lower"`
	PredictedUpper   *float64      `json:"predicted_upper"`
	Logged           *float64      `json:"logged"`
	LoggedResolution *float64      `json:"logged_resolution"`
	LoggedNote       SourceNote    `json:"logged_note"` // what the logged figure holds (e.g. absolute_non_torch)
	AbsError         *float64      `json:"abs_error"`
	RelError         *float64      `json:"rel_error"`
	WithinBand       *bool         `json:"within_band"`
}

// cmpSide is one side of a figure.
type cmpSide struct {
	v, lo, hi *float64
	status    string
	reason    string
	res       *float64
	note      SourceNote
}

// Compare returns the figures of obs next to pred, in the fixed order of
// the Figure constants. When obs names a pipeline stage that pred has a
// per-stage prediction for, that stage's weights, KV budget and blocks are
// used instead of the worst stage's.
func Compare(pred Prediction, obs Observation) []FigureError {
	rp := cmpStage(pred, obs)
	weights, availKV, blocks := pred.WeightBytesPerRank, pred.AvailableKVBytes, pred.NumBlocks
	if rp != nil {
		weights, availKV, blocks = rp.WeightBytes, rp.AvailableKVBytes, rp.NumBlocks
	}
	kvKnown := availKV.Known() && pred.KVBytesPerToken > 0
	rows := []FigureError{
		cmpRow(FigRequested, UnitBytes, cmpPlain(float64(pred.RequestedBytes), pred.RequestedBytes > 0, "requested memory not computed"), obs.loggedBytes(FieldRequested, obs.RequestedBytes)),
		cmpRow(FigWeights, UnitBytes, cmpComponent(weights), obs.loggedBytes(FieldModelWeight, obs.ModelWeightBytes)),
		cmpRow(FigActivationPeak, UnitBytes, cmpComponent(pred.ActivationPeak), obs.loggedTorchPeak()),
		cmpRow(FigNonTorch, UnitBytes, cmpComponent(pred.NonTorch), obs.loggedBytes(FieldNonTorchIncrease, obs.NonTorchIncreaseBytes)),
		cmpRow(FigCUDAGraphEstimate, UnitBytes, cmpComponent(pred.CUDAGraphEstimate), obs.loggedBytes(FieldCUDAGraphEstimate, obs.CUDAGraphEstimateBytes)),
		cmpRow(FigCUDAGraphActual, UnitBytes, cmpComponent(pred.CUDAGraphEstimate), obs.loggedBytes(FieldCUDAGraphActual, obs.CUDAGraphActualBytes)),
		cmpRow(FigAvailableKV, UnitBytes, cmpComponent(availKV), obs.loggedBytes(FieldAvailableKV, obs.AvailableKVBytes)),
		cmpRow(FigKVTokens, UnitTokens, cmpPlain(float64(pred.KVCapacityTokens), kvKnown, "KV budget unknown"), obs.loggedBytes(FieldKVCacheTokens, obs.KVCacheSizeTokens)),
		cmpRow(FigGPUBlocks, UnitBlocks, cmpPlain(float64(blocks), kvKnown, "KV budget unknown"), obs.loggedBytes(FieldNumGPUBlocks, obs.NumGPUBlocks)),
		cmpConcurrency(pred, obs, kvKnown),
	}
	return rows
}

// cmpStage finds the per-stage prediction for the observed pipeline rank.
func cmpStage(pred Prediction, obs Observation) *RankPrediction {
	if obs.PPRank == nil {
		return nil
	}
	for i := range pred.Ranks {
		if pred.Ranks[i].PPRank == *obs.PPRank {
			return &pred.Ranks[i]
		}
	}
	return nil
}

func cmpF(v float64) *float64 { return &v }

func cmpComponent(c Component) cmpSide {
	s := cmpSide{status: string(c.Status), reason: c.Reason}
	if c.Known() {
		s.v, s.lo, s.hi = cmpF(float64(c.Bytes)), cmpF(float64(c.Lower)), cmpF(float64(c.Upper))
	}
	return s
}

func cmpPlain(v float64, known bool, why string) cmpSide {
	if !known {
		return cmpSide{status: string(StatusUnknown), reason: why}
	}
	return cmpSide{v: cmpF(v), status: string(StatusDerived)}
}

// loggedBytes is one logged figure with its resolution and note.
func (o Observation) loggedBytes(field string, v *int64) cmpSide {
	if v == nil {
		return cmpSide{}
	}
	src := o.Sources[field]
	return cmpSide{v: cmpF(float64(*v)), res: cmpF(src.Resolution), note: src.Note}
}

// loggedTorchPeak is vLLM's torch peak increase from the raw fields
// (persistent + transient), unknown when the split leaves it open.
func (o Observation) loggedTorchPeak() cmpSide {
	v, res, ok := o.torchPeakIncrease()
	if !ok {
		return cmpSide{}
	}
	return cmpSide{v: cmpF(float64(v)), res: cmpF(res), note: o.Sources[FieldTransientPeak].Note}
}

// cmpConcurrency compares concurrency only at the context the log used.
func cmpConcurrency(pred Prediction, obs Observation, kvKnown bool) FigureError {
	p := cmpPlain(pred.MaxConcurrencyAtMaxLen, kvKnown, "KV budget unknown")
	l := cmpSide{}
	if obs.MaxConcurrency != nil {
		src := obs.Sources[FieldMaxConcurrency]
		l = cmpSide{v: cmpF(*obs.MaxConcurrency), res: cmpF(src.Resolution), note: src.Note}
	}
	row := cmpRow(FigMaxConcurrency, UnitRatio, p, l)
	if row.Compared && (obs.MaxConcurrencyTokens == nil || *obs.MaxConcurrencyTokens != pred.Launch.MaxModelLen) {
		row.Compared, row.Reason = false, ReasonContextDiffers
		row.AbsError, row.RelError, row.WithinBand = nil, nil, nil
	}
	return row
}

// cmpRow builds a row from its two sides.
func cmpRow(fig Figure, unit FigureUnit, p, l cmpSide) FigureError {
	r := FigureError{
		Figure: fig, Unit: unit, PredictedStatus: p.status, PredictedReason: p.reason,
		Predicted: p.v, PredictedLower: p.lo, PredictedUpper: p.hi,
		Logged: l.v, LoggedResolution: l.res, LoggedNote: l.note, Reason: ReasonNone,
	}
	if r.LoggedNote == "" {
		r.LoggedNote = vllmlog.NoteNone
	}
	switch {
	case p.v == nil && l.v == nil:
		r.Reason = ReasonBothUnknown
		return r
	case p.v == nil:
		r.Reason = ReasonPredictedUnknown
		return r
	case l.v == nil:
		r.Reason = ReasonLoggedUnknown
		return r
	}
	r.Compared = true
	d := *p.v - *l.v
	r.AbsError = cmpF(d)
	if *l.v == 0 {
		r.Reason = ReasonLoggedZero
	} else {
		r.RelError = cmpF(d / math.Abs(*l.v))
	}
	lo, hi := *p.v, *p.v
	if p.lo != nil && p.hi != nil {
		lo, hi = *p.lo, *p.hi
	}
	res := 0.0
	if l.res != nil {
		res = *l.res
	}
	in := *l.v >= lo-res && *l.v <= hi+res
	r.WithinBand = &in
	return r
}

// cmpFigureField maps byte figures to the Observation field their error is
// recorded under in PredictedMinusMeasured.
var cmpFigureField = map[Figure]string{
	FigRequested: FieldRequested, FigWeights: FieldModelWeight, FigActivationPeak: FieldTransientPeak,
	FigNonTorch: FieldNonTorchIncrease, FigCUDAGraphEstimate: FieldCUDAGraphEstimate,
	FigCUDAGraphActual: FieldCUDAGraphActual, FigAvailableKV: FieldAvailableKV,
}

// ApplyComparison returns obs with PredictedMinusMeasured filled from the
// compared byte figures (predicted − measured, bytes; the activation peak
// is recorded under the transient field that carries it).
func ApplyComparison(obs Observation, rows []FigureError) Observation {
	m := map[string]int64{}
	for k, v := range obs.PredictedMinusMeasured {
		m[k] = v
	}
	for _, r := range rows {
		f, ok := cmpFigureField[r.Figure]
		if ok && r.Compared && r.AbsError != nil {
			m[f] = int64(math.Round(*r.AbsError))
		}
	}
	obs.PredictedMinusMeasured = m
	return obs
}
