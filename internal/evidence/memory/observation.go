package memory

// Memory profiling observations (ADR-006 "Memory profiling stores
// non-overlapping raw observations"; reference/evidence.md §2.10).
//
// An Observation is what one worker (rank) of one vLLM execution reported
// about its memory at startup. Each byte is counted in exactly one raw
// field, all relative to the same baseline (the snapshot after the weights
// are loaded):
//
//	ModelWeightBytes       PyTorch memory held by the loaded model
//	PersistentBytes        other PyTorch memory still allocated after the profile run
//	TransientPeakBytes     the PyTorch peak of the profile run above that level
//	NonTorchIncreaseBytes  growth of memory PyTorch did not allocate (NCCL, context, workspaces)
//
// so vLLM's torch_peak_increase is PersistentBytes + TransientPeakBytes and
// its non_kv_cache_memory is the sum of all four. vLLM's own sums
// (non_kv_cache_memory, peak_activation_memory, …) are kept apart in
// VLLMSums as cross-checks, never in place of a raw field and never added
// to the CUDA-graph estimate (which would count the estimate twice).
//
// Every figure is nullable: nil means not observed, which is not 0.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllmlog"
)

// Observation record identity.
const (
	ObservationSchema        = "narwhal.memory.observation"
	ObservationSchemaVersion = 1
)

// Observation is the non-overlapping raw memory record of one rank.
// Identity (the fingerprint) is the execution and the rank; the figures
// are display fields, so two observations of the same execution share a
// fingerprint and differ in digest (reference/evidence.md §2.10.2).
//
// Rank coordinates are nullable too: a log that does not name a worker's
// rank leaves it nil rather than letting it default to 0.
type Observation struct {
	Schema               string  `json:"schema" ev:"id"`
	SchemaVersion        int     `json:"schema_version" ev:"display"`
	ExecutionFingerprint *string `json:"execution_fingerprint" ev:"id"` // "1220…" from execfp; nil until the caller knows it
	Rank                 *int    `json:"rank" ev:"id"`                  // the worker's rank as the engine names it
	DPRank               *int    `json:"dp_rank" ev:"id"`
	PPRank               *int    `json:"pp_rank" ev:"id"`
	TPRank               *int    `json:"tp_rank" ev:"id"`

	InitialTotalBytes        *int64   `json:"initial_total_bytes" ev:"display"`
	InitialFreeBytes         *int64   `json:"initial_free_bytes" ev:"display"`
	RequestedBytes           *int64   `json:"requested_bytes" ev:"display"`
	GPUMemoryUtilization     *float64 `json:"gpu_memory_utilization" ev:"display"`
	ModelWeightBytes         *int64   `json:"model_weight_bytes" ev:"display"`
	PersistentBytes          *int64   `json:"persistent_consumption_bytes" ev:"display"`
	TransientPeakBytes       *int64   `json:"transient_peak_headroom_bytes" ev:"display"`
	NonTorchIncreaseBytes    *int64   `json:"non_torch_increase_bytes" ev:"display"`
	CUDAGraphEstimateBytes   *int64   `json:"cudagraph_estimate_bytes" ev:"display"`
	CUDAGraphEstimateApplied *bool    `json:"cudagraph_estimate_applied" ev:"display"`
	CUDAGraphActualBytes     *int64   `json:"cudagraph_actual_bytes" ev:"display"`
	AvailableKVBytes         *int64   `json:"available_kv_cache_bytes" ev:"display"`
	SafetyBufferBytes        *int64   `json:"safety_buffer_bytes" ev:"display"`
	KVCacheSizeTokens        *int64   `json:"kv_cache_size_tokens" ev:"display"`
	NumGPUBlocks             *int64   `json:"num_gpu_blocks" ev:"display"`
	MaxConcurrency           *float64 `json:"max_concurrency" ev:"display"`
	MaxConcurrencyTokens     *int64   `json:"max_concurrency_tokens" ev:"display"` // the N of "Maximum concurrency for N tokens per request"

	Sums                   VLLMSums                     `json:"vllm_sums" ev:"display"`
	Sources                map[string]ObservationSource `json:"sources" ev:"display"`
	PredictedMinusMeasured map[string]int64             `json:"predicted_minus_measured" ev:"display"`
}

// VLLMSums are the totals vLLM itself prints. Each overlaps several raw
// fields; they are stored to cross-check the raw fields, never instead of
// them.
type VLLMSums struct {
	NonKVCacheBytes                *int64 `json:"non_kv_cache_bytes"`                 // "Total non KV cache memory"
	TorchPeakBytes                 *int64 `json:"torch_peak_bytes"`                   // V0 "peak_torch_memory": the allocator peak, weights included
	PeakActivationBytes            *int64 `json:"peak_activation_bytes"`              // "… GiB for peak activation" (may include the applied graph estimate)
	WeightsPlusNonTorchBytes       *int64 `json:"weights_plus_non_torch_bytes"`       // "… GiB for consumed memory (weights + non-torch)"
	CUDAGraphSizingBytes           *int64 `json:"cudagraph_sizing_bytes"`             // "… GiB for CUDAGraph memory": actual or max(actual, estimate)
	CUDAGraphPoolEstimateBytes     *int64 `json:"cudagraph_pool_estimate_bytes"`      // "CUDA graph pool memory: … (estimated)"
	SuggestedKVCacheRequestedBytes *int64 `json:"suggested_kv_cache_requested_bytes"` // "--kv-cache-memory=N … to fit into requested memory"
	SuggestedKVCacheDeviceBytes    *int64 `json:"suggested_kv_cache_device_bytes"`    // "--kv-cache-memory=N … to fully utilize gpu memory"
}

// SourceKind says where a figure came from.
type SourceKind string

// Source kinds.
const (
	SourceLogLine          SourceKind = "log_line"          // an INFO/WARNING line of the startup log
	SourceDebugLog         SourceKind = "debug_log"         // a DEBUG line (VLLM_LOGGING_LEVEL=DEBUG)
	SourceDerived          SourceKind = "derived"           // arithmetic over logged figures (see Note)
	SourceMetrics          SourceKind = "metrics"           // a metrics endpoint
	SourceInstrumentedHook SourceKind = "instrumented_hook" // exact bytes from a hook in the engine
)

var obsSourceKinds = map[SourceKind]bool{SourceLogLine: true, SourceDebugLog: true, SourceDerived: true, SourceMetrics: true, SourceInstrumentedHook: true}

// SourceNote qualifies what a figure holds when that differs from the
// field's plain meaning: the notes of vllmlog's line table, and
// NoteDifference for figures derived here.
type SourceNote = vllmlog.Note

// NoteDifference marks a figure derived here: the difference of two
// logged figures. The other notes are vllmlog's (vllmlog.NoteNone, …).
const NoteDifference SourceNote = "difference"

var obsSourceNotes = map[SourceNote]bool{vllmlog.NoteNone: true, vllmlog.NoteIncludesPersistent: true, vllmlog.NoteAbsoluteNonTorch: true, vllmlog.NoteEngineLevel: true, vllmlog.NoteConfigured: true, NoteDifference: true}

// PatternID names the vllmlog pattern a figure was read with. It is an
// identifier from a closed set, never text from the log.
type PatternID = vllmlog.PatternID

// ObservationSource records how one figure was obtained. Resolution is in
// the field's own unit (bytes, tokens, blocks, or the dimensionless ratio):
// a value vLLM prints in GiB with two decimals has resolution 0.01 GiB =
// 10737418.24 bytes, and differences smaller than that are not meaningful.
type ObservationSource struct {
	Kind       SourceKind `json:"kind"`
	Pattern    PatternID  `json:"pattern"`
	Resolution float64    `json:"resolution"`
	Note       SourceNote `json:"note"`
}

// Field names of an Observation, as the json tags spell them; Sources is
// keyed by them (sums as "vllm_sums.<name>").
const (
	FieldInitialTotal        = "initial_total_bytes"
	FieldInitialFree         = "initial_free_bytes"
	FieldRequested           = "requested_bytes"
	FieldUtilization         = "gpu_memory_utilization"
	FieldModelWeight         = "model_weight_bytes"
	FieldPersistent          = "persistent_consumption_bytes"
	FieldTransientPeak       = "transient_peak_headroom_bytes"
	FieldNonTorchIncrease    = "non_torch_increase_bytes"
	FieldCUDAGraphEstimate   = "cudagraph_estimate_bytes"
	FieldCUDAGraphApplied    = "cudagraph_estimate_applied"
	FieldCUDAGraphActual     = "cudagraph_actual_bytes"
	FieldAvailableKV         = "available_kv_cache_bytes"
	FieldSafetyBuffer        = "safety_buffer_bytes"
	FieldKVCacheTokens       = "kv_cache_size_tokens"
	FieldNumGPUBlocks        = "num_gpu_blocks"
	FieldMaxConcurrency      = "max_concurrency"
	FieldMaxConcurrencyLen   = "max_concurrency_tokens"
	SumNonKVCache            = "vllm_sums.non_kv_cache_bytes"
	SumTorchPeak             = "vllm_sums.torch_peak_bytes"
	SumPeakActivation        = "vllm_sums.peak_activation_bytes"
	SumWeightsPlusNonTorch   = "vllm_sums.weights_plus_non_torch_bytes"
	SumCUDAGraphSizing       = "vllm_sums.cudagraph_sizing_bytes"
	SumCUDAGraphPoolEstimate = "vllm_sums.cudagraph_pool_estimate_bytes"
	SumSuggestedKVRequested  = "vllm_sums.suggested_kv_cache_requested_bytes"
	SumSuggestedKVDevice     = "vllm_sums.suggested_kv_cache_device_bytes"
)

// NewObservation returns an empty observation: every figure unknown.
func NewObservation() Observation {
	return Observation{
		Schema:                 ObservationSchema,
		SchemaVersion:          ObservationSchemaVersion,
		Sources:                map[string]ObservationSource{},
		PredictedMinusMeasured: map[string]int64{},
	}
}

// obsByteField is one int64 figure with its name and the sign it may take.
type obsByteField struct {
	name   string
	v      *int64
	signed bool // may be negative (vLLM logs negative KV budgets and graph deltas)
}

// byteFields lists the raw byte fields in a fixed order.
func (o *Observation) byteFields() []obsByteField {
	return []obsByteField{
		{FieldInitialTotal, o.InitialTotalBytes, false},
		{FieldInitialFree, o.InitialFreeBytes, false},
		{FieldRequested, o.RequestedBytes, false},
		{FieldModelWeight, o.ModelWeightBytes, false},
		{FieldPersistent, o.PersistentBytes, true},
		{FieldTransientPeak, o.TransientPeakBytes, false},
		{FieldNonTorchIncrease, o.NonTorchIncreaseBytes, true},
		{FieldCUDAGraphEstimate, o.CUDAGraphEstimateBytes, true},
		{FieldCUDAGraphActual, o.CUDAGraphActualBytes, true},
		{FieldAvailableKV, o.AvailableKVBytes, true},
		{FieldSafetyBuffer, o.SafetyBufferBytes, false},
		{SumNonKVCache, o.Sums.NonKVCacheBytes, true},
		{SumTorchPeak, o.Sums.TorchPeakBytes, false},
		{SumPeakActivation, o.Sums.PeakActivationBytes, true},
		{SumWeightsPlusNonTorch, o.Sums.WeightsPlusNonTorchBytes, true},
		{SumCUDAGraphSizing, o.Sums.CUDAGraphSizingBytes, true},
		{SumCUDAGraphPoolEstimate, o.Sums.CUDAGraphPoolEstimateBytes, true},
		{SumSuggestedKVRequested, o.Sums.SuggestedKVCacheRequestedBytes, true},
		{SumSuggestedKVDevice, o.Sums.SuggestedKVCacheDeviceBytes, true},
	}
}

// present reports which fields hold a value, by name.
func (o *Observation) present() map[string]bool {
	p := map[string]bool{}
	for _, f := range o.byteFields() {
		p[f.name] = f.v != nil
	}
	p[FieldUtilization] = o.GPUMemoryUtilization != nil
	p[FieldCUDAGraphApplied] = o.CUDAGraphEstimateApplied != nil
	p[FieldKVCacheTokens] = o.KVCacheSizeTokens != nil
	p[FieldNumGPUBlocks] = o.NumGPUBlocks != nil
	p[FieldMaxConcurrency] = o.MaxConcurrency != nil
	p[FieldMaxConcurrencyLen] = o.MaxConcurrencyTokens != nil
	return p
}

// Encode validates o (without a device bound) and returns its canonical
// bytes and digest.
func (o Observation) Encode() ([]byte, string, error) {
	if err := o.Validate(nil); err != nil {
		return nil, "", err
	}
	b, d, err := canon.MarshalDigest(o)
	if err != nil {
		return nil, "", fmt.Errorf("memory observation: %w", err)
	}
	return b, d, nil
}

// Fingerprint is the digest of the identity projection: the schema, the
// execution fingerprint and the rank coordinates.
func (o Observation) Fingerprint() (string, error) {
	_, d, err := canon.MarshalDigest(evidence.IdentityProjection(o))
	if err != nil {
		return "", fmt.Errorf("memory observation fingerprint: %w", err)
	}
	return d, nil
}

// ObservationViolation is one reason an observation is invalid.
type ObservationViolation struct {
	Field string
	Msg   string
}

func (v ObservationViolation) String() string { return v.Field + ": " + v.Msg }

// ObservationError lists every violation found, in a fixed order.
type ObservationError struct {
	Who        string // "rank 0", "worker 2" or "observation"
	Violations []ObservationViolation
}

func (e *ObservationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return "memory observation (" + e.Who + "): " + strings.Join(parts, "; ")
}

// Validate checks o against the schema ranges, the non-overlap and
// accounting identities within the figures' resolutions, and — when
// gpuTotalBytes is known — the device's total memory: no figure may exceed
// it, and the total the engine saw may not be larger than the device. A
// smaller total is allowed (MIG slices, partitioned devices).
func (o Observation) Validate(gpuTotalBytes *int64) error {
	var vs []ObservationViolation
	add := func(field, format string, a ...any) {
		vs = append(vs, ObservationViolation{field, fmt.Sprintf(format, a...)})
	}
	o.checkHeader(add)
	o.checkRanges(add)
	o.checkSources(add)
	o.checkDevice(gpuTotalBytes, add)
	o.checkNonOverlap(add)
	o.checkAccounting(add)
	if len(vs) == 0 {
		return nil
	}
	return &ObservationError{Who: o.who(), Violations: vs}
}

func (o *Observation) who() string {
	if o.Rank != nil {
		return fmt.Sprintf("rank %d", *o.Rank)
	}
	if o.TPRank != nil {
		return fmt.Sprintf("tp rank %d", *o.TPRank)
	}
	return "rank unknown"
}

type obsAddFunc func(field, format string, a ...any)

func (o *Observation) checkHeader(add obsAddFunc) {
	if o.Schema != ObservationSchema {
		add("schema", "%q: want %q", o.Schema, ObservationSchema)
	}
	if o.SchemaVersion < 1 || o.SchemaVersion > ObservationSchemaVersion {
		add("schema_version", "%d: this narwhal reads version %d", o.SchemaVersion, ObservationSchemaVersion)
	}
	if o.ExecutionFingerprint != nil && !canon.IsDigest(*o.ExecutionFingerprint) {
		add("execution_fingerprint", "%q is not a 1220… digest; take it from execfp.Fingerprint", *o.ExecutionFingerprint)
	}
	for _, r := range []struct {
		n string
		v *int
	}{{"rank", o.Rank}, {"dp_rank", o.DPRank}, {"pp_rank", o.PPRank}, {"tp_rank", o.TPRank}} {
		if r.v != nil && *r.v < 0 {
			add(r.n, "%d is negative", *r.v)
		}
	}
}

// obsMaxBytes bounds every byte figure: the largest integer a record carries
// exactly (2^53 − 1, about 9 PB).
const obsMaxBytes = 1<<53 - 1

func (o *Observation) checkRanges(add obsAddFunc) {
	for _, f := range o.byteFields() {
		switch {
		case f.v == nil:
		case *f.v > obsMaxBytes || *f.v < -obsMaxBytes:
			add(f.name, "%d is beyond ±2^53", *f.v)
		case !f.signed && *f.v < 0:
			add(f.name, "%d is negative; this figure cannot be", *f.v)
		}
	}
	if o.InitialTotalBytes != nil && *o.InitialTotalBytes == 0 {
		add(FieldInitialTotal, "0: a device has memory")
	}
	if u := o.GPUMemoryUtilization; u != nil && !(*u > 0 && *u <= 1) {
		add(FieldUtilization, "%v: want a fraction in (0, 1]", *u)
	}
	nonNeg := []struct {
		n string
		v *int64
	}{{FieldKVCacheTokens, o.KVCacheSizeTokens}, {FieldNumGPUBlocks, o.NumGPUBlocks}}
	for _, f := range nonNeg {
		if f.v != nil && (*f.v < 0 || *f.v > obsMaxBytes) {
			add(f.n, "%d: want 0 … 2^53", *f.v)
		}
	}
	if c := o.MaxConcurrency; c != nil && (*c < 0 || math.IsNaN(*c) || math.IsInf(*c, 0)) {
		add(FieldMaxConcurrency, "%v: want a finite value ≥ 0", *c)
	}
	if n := o.MaxConcurrencyTokens; n != nil && (*n < 1 || *n > obsMaxBytes) {
		add(FieldMaxConcurrencyLen, "%d: want 1 … 2^53", *n)
	}
}

// checkSources: every figure says how it is known, and every source names
// a figure that is present.
func (o *Observation) checkSources(add obsAddFunc) {
	present := o.present()
	names := make([]string, 0, len(present))
	for n := range present {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if present[n] {
			if _, ok := o.Sources[n]; !ok {
				add(n, "has a value but no entry in sources; record how it was obtained")
			}
		}
	}
	keys := make([]string, 0, len(o.Sources))
	for k := range o.Sources {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := o.Sources[k]
		switch {
		case !present[k]:
			add("sources."+k, "names a figure that is absent or unknown to this schema")
		case !obsSourceKinds[s.Kind]:
			add("sources."+k, "kind %q is not a source kind", s.Kind)
		case !obsSourceNotes[s.Note]:
			add("sources."+k, "note %q is not a source note", s.Note)
		case s.Pattern == "":
			add("sources."+k, "pattern is empty")
		case !(s.Resolution >= 0) || math.IsInf(s.Resolution, 0):
			add("sources."+k, "resolution %v: want a finite value ≥ 0", s.Resolution)
		}
	}
}

// res is the resolution of a present figure (0 when it has no source).
func (o *Observation) res(field string) float64 { return o.Sources[field].Resolution }

func (o *Observation) checkDevice(gpuTotal *int64, add obsAddFunc) {
	bound, boundName := gpuTotal, "the device's total memory"
	if bound == nil {
		bound, boundName = o.InitialTotalBytes, FieldInitialTotal
	}
	if bound == nil {
		return
	}
	if gpuTotal != nil && o.InitialTotalBytes != nil && float64(*o.InitialTotalBytes-*gpuTotal) > o.res(FieldInitialTotal) {
		add(FieldInitialTotal, "%s is larger than the device's %s; the log is from another GPU or --gpu-memory-gib is wrong", units.GiB(*o.InitialTotalBytes), units.GiB(*gpuTotal))
	}
	for _, f := range o.byteFields() {
		if f.v == nil || f.name == FieldInitialTotal {
			continue
		}
		if m := obsAbs(*f.v); float64(m-*bound) > o.res(f.name)+o.res(FieldInitialTotal) {
			add(f.name, "%s exceeds %s (%s)", units.GiB(*f.v), boundName, units.GiB(*bound))
		}
	}
}

// torchPeakIncrease is vLLM's torch_peak_increase from the raw fields:
// persistent + transient, or transient alone when it is noted to include
// the persistent part. ok is false when it cannot be formed.
func (o *Observation) torchPeakIncrease() (v int64, res float64, ok bool) {
	if o.TransientPeakBytes == nil {
		return 0, 0, false
	}
	v, res = *o.TransientPeakBytes, o.res(FieldTransientPeak)
	if o.PersistentBytes != nil {
		return v + *o.PersistentBytes, res + o.res(FieldPersistent), true
	}
	return v, res, o.Sources[FieldTransientPeak].Note == vllmlog.NoteIncludesPersistent
}

// nonKVParts is weights + torch peak increase + non-torch increase.
func (o *Observation) nonKVParts() (v int64, res float64, ok bool) {
	tp, tres, ok := o.torchPeakIncrease()
	if !ok || o.ModelWeightBytes == nil || o.NonTorchIncreaseBytes == nil {
		return 0, 0, false
	}
	return *o.ModelWeightBytes + tp + *o.NonTorchIncreaseBytes, tres + o.res(FieldModelWeight) + o.res(FieldNonTorchIncrease), true
}

// checkNonOverlap: the raw parts must add up to vLLM's own non-KV sum
// within the resolutions; a gap or excess means a byte is counted twice or
// not at all.
func (o *Observation) checkNonOverlap(add obsAddFunc) {
	parts, pres, ok := o.nonKVParts()
	if !ok || o.Sums.NonKVCacheBytes == nil {
		return
	}
	if d := float64(obsAbs(parts - *o.Sums.NonKVCacheBytes)); d > pres+o.res(SumNonKVCache)+1 {
		add(SumNonKVCache, "weights + torch peak increase + non-torch increase = %s, but vLLM's non-KV total is %s: a figure is counted twice or missing", units.GiB(parts), units.GiB(*o.Sums.NonKVCacheBytes))
	}
}

// checkAccounting: vLLM's budget identity, available = requested −
// non-KV parts − the applied CUDA-graph estimate, and requested = total ×
// utilization, each within the resolutions of the figures involved.
func (o *Observation) checkAccounting(add obsAddFunc) {
	if o.RequestedBytes != nil && o.InitialTotalBytes != nil && o.GPUMemoryUtilization != nil {
		want := float64(*o.InitialTotalBytes) * *o.GPUMemoryUtilization
		tol := o.res(FieldRequested) + o.res(FieldInitialTotal)**o.GPUMemoryUtilization + o.res(FieldUtilization)*float64(*o.InitialTotalBytes) + 1
		if math.Abs(float64(*o.RequestedBytes)-want) > tol {
			add(FieldRequested, "%s is not total %s × utilization %v", units.GiB(*o.RequestedBytes), units.GiB(*o.InitialTotalBytes), *o.GPUMemoryUtilization)
		}
	}
	parts, pres, ok := o.nonKVParts()
	if !ok || o.RequestedBytes == nil || o.AvailableKVBytes == nil || o.CUDAGraphEstimateApplied == nil {
		return
	}
	applied, ares := int64(0), 0.0
	if *o.CUDAGraphEstimateApplied {
		if o.CUDAGraphEstimateBytes == nil {
			return
		}
		applied, ares = *o.CUDAGraphEstimateBytes, o.res(FieldCUDAGraphEstimate)
	}
	want := *o.RequestedBytes - parts - applied
	if d := float64(obsAbs(want - *o.AvailableKVBytes)); d > pres+ares+o.res(FieldRequested)+o.res(FieldAvailableKV)+1 {
		add(FieldAvailableKV, "%s, but requested − weights − torch peak − non-torch − applied graph estimate = %s: the log mixes two startups or a figure is misread", units.GiB(*o.AvailableKVBytes), units.GiB(want))
	}
}

func obsAbs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// gib formats bytes for messages.
// IsObservationError reports whether err is a *ObservationError.
func IsObservationError(err error) bool {
	var v *ObservationError
	return errors.As(err, &v)
}

// QuantityObservation marks a memory observation stored as a record:
// one worker's figures read from an engine's startup log
// (reference/evidence.md §2.10).
const QuantityObservation = "memory_observation"

// ObservationRecord is o as a measured metadata record about subject
// (the plan's artifact, hardware class and execution, or the preflight's
// engine endpoint), read from source; o's execution fingerprint is set
// to execution first. The observation's fingerprint joins the subject so
// each worker's is its own record.
func ObservationRecord(o Observation, execution string, subject map[string]string, engineVersion, producer, producerVersion, source string, clock ports.Clock) (evidence.Record, error) {
	o.ExecutionFingerprint = &execution
	raw, _, err := o.Encode()
	if err != nil {
		return evidence.Record{}, fmt.Errorf("memory observation from %s: %w", source, err)
	}
	var display any
	if err := json.Unmarshal(raw, &display); err != nil {
		return evidence.Record{}, err
	}
	id, err := o.Fingerprint()
	if err != nil {
		return evidence.Record{}, err
	}
	subj := map[string]string{"observation": id}
	for k, v := range subject {
		subj[k] = v
	}
	verdict := "observed"
	rec := evidence.Record{
		Kind: evidence.KindMetadata, ClaimScope: evidence.ScopeMemory, EpistemicStatus: evidence.Measured,
		Level: evidence.MaintainerLabMeasured, Subject: subj,
		Claim:      evidence.Claim{Quantity: QuantityObservation, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "vllm", Version: engineVersion, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: producer, ProducerVersion: producerVersion, Inputs: []string{}},
		Display:    map[string]any{"observation": display, "source": source},
	}
	return evidence.Stamp(rec, clock), nil
}
