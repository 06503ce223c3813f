package sweep

import (
	"time"

	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/profile/fit"
)

// Samples is everything one engine's sweep measured, kept whether or not
// the fit was accepted: the <stem>.samples.json entry for the engine.
type Samples struct {
	IID              string       `json:"iid"`
	Config           ConfigRecord `json:"config"`
	Before           Generation   `json:"generation_before"`
	After            Generation   `json:"generation_after"`
	MaxModelLen      int          `json:"max_model_len"`
	KVCapacityTokens int          `json:"kv_capacity_tokens,omitempty"`
	BlockSize        int          `json:"block_size,omitempty"`

	Prefill        []PrefillSample `json:"prefill"`
	PrefillMedians []fit.Point     `json:"prefill_medians"`
	PrefillFit     *fit.Prefill    `json:"prefill_fit,omitempty"`

	Decode       []DecodeSample `json:"decode_intervals"`
	DecodeCells  []fit.Cell     `json:"decode_cells"`
	SkippedCells []string       `json:"skipped_decode_cells,omitempty"`
	DecodeFit    *fit.Decode    `json:"decode_fit,omitempty"`

	Warm      []WarmSample   `json:"warm,omitempty"`
	WarmCases []fit.WarmCase `json:"warm_cases,omitempty"`
	WarmFit   *fit.Warm      `json:"warm_fit,omitempty"`

	Profile *profile.Row `json:"profile,omitempty"`
	Error   string       `json:"error,omitempty"`
	Elapsed float64      `json:"elapsed_s"`
}

// ConfigRecord is the sweep configuration as the samples file keeps it.
type ConfigRecord struct {
	PrefillLengths []int   `json:"prefill_lengths"`
	PrefillRepeats int     `json:"prefill_repeats"`
	DecodeLengths  []int   `json:"decode_lengths"`
	Concurrency    []int   `json:"concurrency"`
	DecodeTokens   int     `json:"decode_tokens"`
	Warm           bool    `json:"warm"`
	WarmPrefixes   []int   `json:"warm_prefixes,omitempty"`
	WarmSuffixes   []int   `json:"warm_suffixes,omitempty"`
	MaxNumSeqs     int     `json:"max_num_seqs,omitempty"`
	MaxFitMAPE     float64 `json:"max_decode_fit_mape"`
	MaxCVMAPE      float64 `json:"max_decode_cv_mape"`
}

func (c Config) record() ConfigRecord {
	return ConfigRecord{PrefillLengths: c.PrefillLengths, PrefillRepeats: c.PrefillRepeats, DecodeLengths: c.DecodeLengths,
		Concurrency: c.Concurrency, DecodeTokens: c.DecodeTokens, Warm: c.Warm, WarmPrefixes: c.WarmPrefixes,
		WarmSuffixes: c.WarmSuffixes, MaxNumSeqs: c.MaxNumSeqs, MaxFitMAPE: c.Limits.MaxDecodeFitMAPE, MaxCVMAPE: c.Limits.MaxDecodeCVMAPE}
}

// PrefillSample is one timed cold completion.
type PrefillSample struct {
	Tokens       int     `json:"tokens"`
	Repeat       int     `json:"repeat"`
	Seconds      float64 `json:"seconds"`
	CachedTokens int     `json:"cached_tokens"`
}

// DecodeSample is one token interval observed with the whole cohort
// resident.
type DecodeSample struct {
	InputTokens int     `json:"input_tokens"`
	Requests    int     `json:"requests"`
	ResidentKV  int     `json:"resident_kv_tokens"`
	Seconds     float64 `json:"interval_s"`
}

// WarmSample is one warm-prefill repeat and its cold control.
type WarmSample struct {
	Prefix      int     `json:"prefix_tokens"`
	Suffix      int     `json:"suffix_tokens"`
	Repeat      int     `json:"repeat"`
	Seconds     float64 `json:"seconds"`
	ColdSeconds float64 `json:"cold_control_seconds"`
}

func secondsSince(t time.Time) float64 { return time.Since(t).Seconds() }
