package memory

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// CalibrationSet is a set of measured startup figures (the seed set:
// published vLLM startup logs, each with its source URL) against which the
// activation, non-torch and CUDA-graph formulas are calibrated: each
// formula's coefficient and uncertainty band come from the spread over the
// entries of the same mechanism class, never from a fixed percentage.
type CalibrationSet struct {
	Schema        string             `json:"schema"`
	SchemaVersion int                `json:"schema_version"`
	Description   string             `json:"description"`
	Entries       []CalibrationEntry `json:"entries"`
}

// CalibrationEntry is one published startup log. Pointers are nil where
// the log does not state the figure; Notes say what the log leaves open.
type CalibrationEntry struct {
	ID          string `json:"id"`
	SourceURL   string `json:"source_url"`
	Model       string `json:"model"`
	ConfigURL   string `json:"config_url"`
	GPU         string `json:"gpu"`
	VLLMVersion string `json:"vllm_version"` // "" when the log does not state it

	Arch   CalibrationArch   `json:"arch"`
	Launch CalibrationLaunch `json:"launch"`
	Logged LoggedFigures     `json:"logged"`
	Notes  string            `json:"notes"`
}

// CalibrationArch are the architecture facts the formulas read, copied
// from the model's published config.json (ConfigURL).
type CalibrationArch struct {
	Mechanism        Mechanism `json:"mechanism"`
	FFN              string    `json:"ffn"`
	Multimodal       bool      `json:"multimodal"`
	HiddenSize       int64     `json:"hidden_size"`
	IntermediateSize int64     `json:"intermediate_size"` // dense MLP, or per expert for MoE
	VocabSize        int64     `json:"vocab_size"`
	NumLayers        int64     `json:"num_layers"`
	NumHeads         int64     `json:"num_heads"`
	NumKVHeads       int64     `json:"num_kv_heads"`
	HeadDim          int64     `json:"head_dim"`
	NumExperts       int64     `json:"num_experts"`
	TopK             int64     `json:"top_k"`
}

// CalibrationLaunch are the launch parameters of the logged run.
// DefaultsAssumed names the fields the log does not state that are filled
// with the version's default for that GPU (and so are an assumption).
type CalibrationLaunch struct {
	TP                   int      `json:"tp"`
	PP                   int      `json:"pp"`
	MaxModelLen          int64    `json:"max_model_len"`
	MaxNumBatchedTokens  int64    `json:"max_num_batched_tokens"`
	MaxNumSeqs           int64    `json:"max_num_seqs"`
	GPUMemoryUtilization float64  `json:"gpu_memory_utilization"`
	BlockSize            int64    `json:"block_size"`
	EnforceEager         bool     `json:"enforce_eager"`
	DefaultCaptureSizes  bool     `json:"default_capture_sizes"`
	DefaultsAssumed      []string `json:"defaults_assumed"`
}

// LoggedFigures are the figures as the log prints them (GiB with two
// decimals, tokens).
type LoggedFigures struct {
	TotalMemoryGiB       *float64 `json:"total_memory_gib"`
	FreeMemoryGiB        *float64 `json:"free_memory_gib"`
	WeightsGiB           *float64 `json:"weights_gib"`
	ActivationPeakGiB    *float64 `json:"activation_peak_gib"` // torch peak increase
	NonTorchGiB          *float64 `json:"non_torch_gib"`
	CUDAGraphGiB         *float64 `json:"cudagraph_gib"`          // memory taken by graph capture
	CUDAGraphEstimateGiB *float64 `json:"cudagraph_estimate_gib"` // vLLM's profiled estimate (v0.21+)
	KVCacheGiB           *float64 `json:"kv_cache_gib"`           // Available KV cache memory
	KVCacheTokens        *int64   `json:"kv_cache_tokens"`
	NumBlocks            *int64   `json:"num_blocks"`
	MaxConcurrency       *float64 `json:"max_concurrency"`
}

// CalibrationSchema names the calibration set format.
const (
	CalibrationSchema        = "narwhal.memory.calibration"
	CalibrationSchemaVersion = 1
)

// LogResolutionBytes is the resolution of a figure vLLM logs in GiB with
// two decimals: ±0.005 GiB.
const LogResolutionBytes = gib / 200

const gib = 1 << 30

//go:embed data/calibration_seed.json
var seedJSON []byte

var seedCalibration = sync.OnceValues(func() (CalibrationSet, error) { return ParseCalibration(seedJSON) })

// SeedCalibration returns the seed calibration set shipped with this
// build.
func SeedCalibration() (CalibrationSet, error) { return seedCalibration() }

// ParseCalibration decodes a calibration set strictly.
func ParseCalibration(b []byte) (CalibrationSet, error) {
	var s CalibrationSet
	if err := decodeVersioned("calibration set", b, &s, CalibrationSchema, CalibrationSchemaVersion); err != nil {
		return CalibrationSet{}, err
	}
	seen := map[string]bool{}
	for i, e := range s.Entries {
		if e.ID == "" || seen[e.ID] {
			return CalibrationSet{}, fmt.Errorf("calibration set: entries[%d]: id %q is empty or repeated", i, e.ID)
		}
		seen[e.ID] = true
		if e.SourceURL == "" {
			return CalibrationSet{}, fmt.Errorf("calibration set: entry %s has no source_url", e.ID)
		}
		if e.Launch.TP < 1 || e.Launch.PP < 1 {
			return CalibrationSet{}, fmt.Errorf("calibration set: entry %s: tp and pp must be ≥ 1", e.ID)
		}
	}
	return s, nil
}

// CalibrationDigest is the digest of a calibration set's canonical form.
func CalibrationDigest(s CalibrationSet) (string, error) {
	_, d, err := canon.MarshalDigest(s)
	return d, err
}

// activationClass keys the activation and CUDA-graph formulas: the
// attention mechanism, the feed-forward kind and whether a vision tower
// takes part in the profile run.
func activationClass(m Mechanism, ffn string, multimodal bool) string {
	mod := "text"
	if multimodal {
		mod = "multimodal"
	}
	return string(m) + "/" + ffn + "/" + mod
}

// minCalibrationEntries is how many entries of a class a band needs: one
// entry gives a coefficient but no spread.
const minCalibrationEntries = 2

// samplerLogitsBytes is the activation formula's driver: vLLM's profile
// run ends with a dummy sampler pass over min(max_num_seqs,
// max_num_batched_tokens) requests whose float32 logits span the whole
// vocabulary (gpu_model_runner._dummy_sampler_run); the sort and softmax
// copies of that tensor are the profile's torch peak in every seed entry,
// so the peak is a calibrated multiple of this size.
func samplerLogitsBytes(maxNumSeqs, maxNumBatchedTokens, vocab int64) int64 {
	return min(maxNumSeqs, maxNumBatchedTokens) * vocab * 4
}

// ratioFit is a calibrated proportional formula: value = Coef × driver,
// band [Lo, Hi] × driver (the 90 % prediction band of the entries'
// ratios, band.go), widened by the log resolution.
type ratioFit struct {
	Coef, Lo, Hi float64
	IDs          []string
}

func (f ratioFit) component(driver int64, src []string) Component {
	b := int64(math.Round(f.Coef * float64(driver)))
	// Memory taken is never negative: a wide band (few entries that
	// disagree) stops at 0.
	lo := max(int64(math.Floor(f.Lo*float64(driver)))-LogResolutionBytes, 0)
	hi := int64(math.Ceil(f.Hi*float64(driver))) + LogResolutionBytes
	return Component{Bytes: b, Lower: min(lo, b), Upper: max(hi, b), Status: StatusPredicted, Source: sortedUnique(append(src, f.IDs...))}
}

// levelFit is a calibrated level: the median of the entries, band their
// 90 % prediction band (band.go) widened by the log resolution. A NonNegative level is memory
// taken, which cannot be below zero: its lower edge stops at 0 instead of
// being widened past it. Floored names the entries whose logged figure was
// negative and entered the fit as 0.
type levelFit struct {
	Median, Lo, Hi int64
	IDs            []string
	NonNegative    bool
	Floored        []string
}

func (f levelFit) component(src []string) Component {
	lo := f.Lo - LogResolutionBytes
	if f.NonNegative {
		lo = max(lo, 0)
	}
	return Component{Bytes: f.Median, Lower: lo, Upper: f.Hi + LogResolutionBytes, Status: StatusPredicted, Source: sortedUnique(append(src, f.IDs...))}
}

func gibBytes(v float64) int64 { return int64(math.Round(v * gib)) }

// calScope is what a plan's fits select calibration entries by: the
// version range [min, max) of the plan's engine facts. vLLM's profile
// figures move between releases (the sampler peak of a dense 8B model on
// an H100 is 4.76 GiB in the seed's 0.11 runs and 1.89 GiB in 0.19 runs at
// the same batch limits; TP 2 non-torch 0.55 against 2.07 GiB), so entries
// from the plan's own range are preferred. The zero scope admits every
// entry as in range.
type calScope struct {
	min, max evidence.Version
	ok       bool
}

// scopeOf is the calibration scope of a plan under f.
func scopeOf(f EngineFacts) calScope {
	lo, err1 := evidence.ParseVersion(f.MinVersion)
	hi, err2 := evidence.ParseVersion(f.MaxVersion)
	if err1 != nil || err2 != nil {
		return calScope{}
	}
	return calScope{min: lo, max: hi, ok: true}
}

// farVersion is the distance of an entry whose version does not parse:
// it is used only when nothing nearer exists.
const farVersion = 1 << 20

// distance is how far an entry's vLLM version lies from the scope, in
// minor releases: 0 inside the range, for an entry that states no version
// (the seed set's convention: such entries describe the release line the
// set is named for and apply as a prediction everywhere) and for the zero
// scope.
func (s calScope) distance(version string) int {
	if !s.ok || version == "" {
		return 0
	}
	v, err := evidence.ParseVersion(normalizeVersion(version))
	if err != nil {
		return farVersion
	}
	switch {
	case v.Compare(s.min) < 0:
		return max(minorsBetween(v, s.min), 1)
	case v.Compare(s.max) >= 0:
		return minorsBetween(s.max, v) + 1
	}
	return 0
}

func minorsBetween(a, b evidence.Version) int {
	return (b.Major-a.Major)*1000 + b.Minor - a.Minor
}

// pick chooses the entries a fit uses among the candidates (entries of
// the right key that log the figure): those in the plan's range when
// there are at least minCalibrationEntries of them; otherwise the nearest
// logged versions are added, a whole distance at a time, until there are
// enough or none are left. The band then spans the versions used, and the
// plan's notes name them (crossNotes).
func (s calScope) pick(cands []CalibrationEntry) []CalibrationEntry {
	type cand struct {
		e    CalibrationEntry
		dist int
	}
	cs := make([]cand, len(cands))
	for i, e := range cands {
		cs[i] = cand{e, s.distance(e.VLLMVersion)}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.dist - b.dist })
	var out []CalibrationEntry
	for i := 0; i < len(cs); {
		if len(out) >= minCalibrationEntries && cs[i].dist > 0 {
			break
		}
		d := cs[i].dist
		for ; i < len(cs) && cs[i].dist == d; i++ {
			out = append(out, cs[i].e)
		}
	}
	return out
}

// fitActivation calibrates the activation formula for one class.
func fitActivation(set CalibrationSet, scope calScope, class string) (ratioFit, error) {
	var cands []CalibrationEntry
	for _, e := range set.Entries {
		if activationClass(e.Arch.Mechanism, e.Arch.FFN, e.Arch.Multimodal) != class || e.Logged.ActivationPeakGiB == nil || e.Launch.PP != 1 {
			continue
		}
		if samplerLogitsBytes(e.Launch.MaxNumSeqs, e.Launch.MaxNumBatchedTokens, e.Arch.VocabSize) <= 0 {
			continue
		}
		cands = append(cands, e)
	}
	var rs []float64
	var ids []string
	for _, e := range scope.pick(cands) {
		d := samplerLogitsBytes(e.Launch.MaxNumSeqs, e.Launch.MaxNumBatchedTokens, e.Arch.VocabSize)
		rs = append(rs, float64(gibBytes(*e.Logged.ActivationPeakGiB))/float64(d))
		ids = append(ids, e.ID)
	}
	if len(rs) < minCalibrationEntries {
		return ratioFit{}, fmt.Errorf("activation peak: %d calibration entries for mechanism class %s, need %d", len(rs), class, minCalibrationEntries)
	}
	lo, hi := predictionBand(rs)
	return ratioFit{Coef: median(rs), Lo: lo, Hi: hi, IDs: ids}, nil
}

// fitNonTorch calibrates the non-torch level for one tensor-parallel
// size: non-torch growth is CUDA context, NCCL and custom all-reduce
// buffers, set by the communication topology rather than the model.
func fitNonTorch(set CalibrationSet, scope calScope, tp, pp int) (levelFit, error) {
	var cands []CalibrationEntry
	for _, e := range set.Entries {
		if e.Launch.TP == tp && e.Launch.PP == pp && e.Logged.NonTorchGiB != nil {
			cands = append(cands, e)
		}
	}
	var vs []int64
	var ids []string
	for _, e := range scope.pick(cands) {
		vs = append(vs, gibBytes(*e.Logged.NonTorchGiB))
		ids = append(ids, e.ID)
	}
	if len(vs) < minCalibrationEntries {
		return levelFit{}, fmt.Errorf("non-torch memory: %d calibration entries at tp=%d pp=%d, need %d", len(vs), tp, pp, minCalibrationEntries)
	}
	lo, hi := predictionBandBytes(vs)
	return levelFit{Median: median(vs), Lo: lo, Hi: hi, IDs: ids}, nil
}

// fitCUDAGraph calibrates the memory taken by graph capture (estimate
// false) or vLLM's profiled estimate (estimate true) for one class at the
// default capture sizes.
//
// vLLM logs the capture as start_free − end_free (gpu_model_runner
// capture_model): a difference of free device memory, negative when the
// capture releases more cached allocator memory than its graph pool takes
// (the seed set's dense entries log −0.88 to +0.10 GiB). The graphs never
// give memory back, so a negative difference says the capture took no
// memory net: it enters the fit as 0 (vLLM's own profiler floors its
// retained-memory difference the same way) and the level is non-negative.
func fitCUDAGraph(set CalibrationSet, scope calScope, class string, estimate bool) (levelFit, error) {
	figure := func(e CalibrationEntry) *float64 {
		if estimate {
			return e.Logged.CUDAGraphEstimateGiB
		}
		return e.Logged.CUDAGraphGiB
	}
	var cands []CalibrationEntry
	for _, e := range set.Entries {
		if activationClass(e.Arch.Mechanism, e.Arch.FFN, e.Arch.Multimodal) != class || e.Launch.EnforceEager || !e.Launch.DefaultCaptureSizes || figure(e) == nil {
			continue
		}
		cands = append(cands, e)
	}
	var vs []int64
	var ids, floored []string
	for _, e := range scope.pick(cands) {
		b := gibBytes(*figure(e))
		if b < 0 {
			b = 0
			floored = append(floored, e.ID)
		}
		vs = append(vs, b)
		ids = append(ids, e.ID)
	}
	what := "CUDA-graph capture memory"
	if estimate {
		what = "CUDA-graph memory estimate"
	}
	if len(vs) < minCalibrationEntries {
		return levelFit{}, fmt.Errorf("%s: %d calibration entries for mechanism class %s at the default capture sizes, need %d", what, len(vs), class, minCalibrationEntries)
	}
	lo, hi := predictionBandBytes(vs)
	return levelFit{Median: median(vs), Lo: lo, Hi: hi, IDs: ids, NonNegative: true, Floored: floored}, nil
}

// median is the middle value, or the mean of the two middle values (an
// integer mean rounds toward zero).
func median[T int64 | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func sortedUnique(xs []string) []string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}
