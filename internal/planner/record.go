package planner

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/execfp"
	"github.com/narwhal-go/narwhal/internal/evidence/memory"
	"github.com/narwhal-go/narwhal/internal/evidence/quant"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/version"
)

// Producer names the records a plan writes.
const Producer = "narwhal plan"

// execution is the fingerprint of the planned execution: what the plan
// knows (artifact, quantization, launch, GPU, topology, shape), with the
// rest — container, backends, torch/CUDA/driver, graph sizes, allocator
// environment — recorded as missing, never guessed.
func execution(res Result, p memory.Prediction) (execfp.Input, string, error) {
	l := p.Launch
	in := execfp.Input{EngineVersion: ptr(res.FactsVersion), EngineConfig: engineConfig(l)}
	if res.Local.Identity != nil {
		in.Artifact = ptr(res.Local.Identity.ContentDigest)
	}
	if fp, err := quant.Fingerprint(res.Quantization); err == nil && res.QuantVerdict.Support == quant.Supported {
		in.Quantization = &fp
	}
	hw := res.GPU
	if hw.Name != "custom" && hw.DeviceName != "" {
		in.GPU.SKU = ptr(hw.DeviceName)
	}
	if hw.TotalMemoryBytes > 0 {
		in.GPU.TotalMemoryBytes = ptr(hw.TotalMemoryBytes)
	}
	if hw.ComputeCapability != "" {
		in.GPU.ComputeCapability = ptr(hw.ComputeCapability)
	}
	tp, pp, dp := max(1, l.TP), max(1, l.PP), max(1, l.DP)
	in.GPU.Count = ptr(tp * pp * dp) // one engine with -dp runs every DP rank
	ep := 1
	if l.EnableExpertParallel {
		ep = tp * dp
	}
	in.Topology = execfp.Topology{TP: &tp, PP: &pp, DP: &dp, EP: &ep, WorldSize: ptr(tp * pp * dp)}
	in.Shape = execfp.WorkloadShape{MaxNumBatchedTokens: resolved(l.MaxNumBatchedTokens), MaxNumSeqs: resolved(l.MaxNumSeqs),
		MaxModelLen: resolved(l.MaxModelLen)}
	if l.EnforceEager {
		mode := execfp.GraphNone
		in.Graph = execfp.Graph{Mode: &mode, CaptureSizes: &[]int{}}
	}
	fp, n, err := execfp.Fingerprint(in)
	if err != nil {
		return execfp.Input{}, "", fmt.Errorf("execution fingerprint: %w", err)
	}
	return n, fp, nil
}

func engineConfig(l memory.LaunchConfig) *execfp.EngineConfig {
	q := l.Quantization
	if q == "" {
		q = "none"
	}
	kv := l.KVCacheDType
	if kv == "" {
		kv = "auto"
	}
	dtype := l.DType
	if dtype == "" {
		dtype = "auto"
	}
	var bs *int
	if l.BlockSize > 0 { // the block size depends on the attention kind: unresolved for a model the plan cannot size
		bs = ptr(int(l.BlockSize))
	}
	return &execfp.EngineConfig{DType: &dtype, Quantization: &q, KVCacheDType: &kv, BlockSize: bs,
		MaxModelLen: resolved(l.MaxModelLen), MaxNumSeqs: resolved(l.MaxNumSeqs), MaxNumBatchedTokens: resolved(l.MaxNumBatchedTokens),
		GPUMemoryUtilization: ptr(l.GPUMemoryUtilization), KVCacheMemoryBytes: kvMemory(l), EnforceEager: ptr(l.EnforceEager),
		TensorParallelSize: ptr(max(1, l.TP)), PipelineParallelSize: ptr(max(1, l.PP)), DataParallelSize: ptr(max(1, l.DP)),
		EnableExpertParallel: ptr(l.EnableExpertParallel), Other: map[string]string{}}
}

func kvMemory(l memory.LaunchConfig) *int64 {
	if l.KVCacheMemoryBytes != nil {
		return l.KVCacheMemoryBytes
	}
	return ptr(int64(0))
}

// ArtifactSubject is the record subject naming the artifact: its content
// identity when resolved; otherwise its lineage, marked so it can never
// be mistaken for an identity (names and shapes never prove identity).
func (r Result) ArtifactSubject() string {
	if r.Local.Identity != nil {
		return r.Local.Identity.ContentDigest
	}
	return "unresolved:lineage:" + r.Lineage.TensorSetDigest
}

// HardwareClass is the record subject naming the hardware class:
// product, memory and capability per device, and the device count.
func (r Result) HardwareClass() string {
	g := r.GPU
	cc := g.ComputeCapability
	if cc == "" {
		cc = "unknown"
	}
	return fmt.Sprintf("%s/%dmib/cc%s/x%d", strings.ToLower(strings.ReplaceAll(g.Name, " ", "-")), g.TotalMemoryBytes>>20, cc, g.Count)
}

// Record is the prediction record: calculated only, epistemic status
// predicted, verdict fits or does_not_fit (or unknown), the margin as its
// value. The full prediction and the execution fingerprint ride along as
// display so that `narwhal evidence show` can print them.
func (r Result) Record(clock ports.Clock) (evidence.Record, error) {
	p := r.Prediction
	verdict := "does_not_fit"
	switch {
	case p.Status != memory.PredictionKnown:
		verdict = "unknown"
	case p.Fits:
		verdict = evidence.VerdictFits
	}
	margin := float64(p.MarginBytes)
	pb, err := canon.Marshal(p)
	if err != nil {
		return evidence.Record{}, fmt.Errorf("prediction: %w", err)
	}
	var display map[string]any
	if err := json.Unmarshal(pb, &display); err != nil {
		return evidence.Record{}, fmt.Errorf("prediction: %w", err)
	}
	rec := evidence.Record{
		Kind: evidence.KindPrediction, ClaimScope: evidence.ScopeMemory, EpistemicStatus: evidence.Predicted,
		Level: evidence.CalculatedOnly,
		Subject: map[string]string{evidence.SubjectArtifact: r.ArtifactSubject(), evidence.SubjectHardwareClass: r.HardwareClass(),
			"execution": r.ExecutionFP},
		Claim:      evidence.Claim{Quantity: "memory_fit", Verdict: &verdict, Value: &margin, Unit: "bytes"},
		Engine:     evidence.Engine{Name: "vllm", Version: r.FactsVersion, Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: r.inputs()},
		Display:    map[string]any{"prediction": display, "stated_margin_bytes": r.StatedMargin},
	}
	return evidence.Stamp(rec, clock), nil
}

// inputs are the digests the prediction was computed from, sorted.
func (r Result) inputs() []string {
	p := r.Prediction
	var out []string
	for _, d := range []string{p.EngineFactsDigest, p.CalibrationDigest, p.GPUTableDigest, p.ConfigDigest, p.HeadersDigest, r.ExecutionFP} {
		if canon.IsDigest(d) {
			out = append(out, d)
		}
	}
	return sortedUnique(out)
}

func ptr[T any](v T) *T { return &v }

// resolved is a launch figure the calculator filled in, or missing (nil)
// where it left it zero: a plan that stopped before resolving the launch
// (an architecture it cannot size) records those fields as not known
// rather than as 0, which no engine runs with.
func resolved(v int64) *int64 {
	if v <= 0 {
		return nil
	}
	return &v
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Source record: what plan read of the artifact, where, and the digests
// it found (reference/evidence.md §2.5: the ArtifactLocator, the
// ArtifactSourceObservation and the identity they resolve to), stored
// beside the prediction so the store says what the prediction was
// computed from and a later reader can tell two locations of one
// identity apart.
const QuantitySource = "artifact_source_observation"

// SourceRecord is the plan's source record: verdict "resolved" when every
// file's digest resolved to an identity, "unresolved" (with why) when not.
func (r Result) SourceRecord(clock ports.Clock) (evidence.Record, error) {
	l := r.Local
	verdict, why := "resolved", ""
	if l.Identity == nil {
		verdict, why = "unresolved", l.Reason
	}
	display := map[string]any{}
	for k, v := range map[string]any{"locator": l.Locator, "source_observation": l.Observation, "identity": l.Identity,
		"unresolved_files": l.Unresolved, "unresolved_reason": why} {
		b, err := canon.Marshal(v)
		if err != nil {
			return evidence.Record{}, fmt.Errorf("source record: %w", err)
		}
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			return evidence.Record{}, fmt.Errorf("source record: %w", err)
		}
		display[k] = x
	}
	rec := evidence.Record{
		Kind: evidence.KindMetadata, ClaimScope: evidence.ScopeConfig, EpistemicStatus: evidence.Measured,
		Level:      evidence.MaintainerLabMeasured,
		Subject:    map[string]string{evidence.SubjectArtifact: r.ArtifactSubject()},
		Claim:      evidence.Claim{Quantity: QuantitySource, Verdict: &verdict},
		Engine:     evidence.Engine{Name: "none", Version: "", Packages: []string{}},
		Provenance: evidence.Provenance{Producer: Producer, ProducerVersion: version.Version, Inputs: []string{}},
		Display:    display,
	}
	return evidence.Stamp(rec, clock), nil
}

// ObservationRecord is o (one worker's figures from a startup log at
// source) as a measured record of the plan's artifact, hardware class and
// execution (memory.ObservationRecord).
func (r Result) ObservationRecord(o memory.Observation, source string, clock ports.Clock) (evidence.Record, error) {
	return memory.ObservationRecord(o, r.ExecutionFP, map[string]string{evidence.SubjectArtifact: r.ArtifactSubject(),
		evidence.SubjectHardwareClass: r.HardwareClass(), "execution": r.ExecutionFP}, r.FactsVersion, Producer, version.Version, source, clock)
}
