// Package quant is the quantization candidate graph of ADR-006
// (reference/evidence.md §2.6): typed artifact, transform, execution and
// quantization objects with canonical serialization, relation rules that
// never infer lineage from names or shapes, and method adapters that read
// a checkpoint's quantization_config and tensor headers and may answer
// unsupported. The package is deterministic: no clock, no randomness, no
// I/O (the artifact package reads files and hands values in).
package quant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// Fingerprint is the digest of v's identity projection (ev:"id" fields
// only), the reference other graph objects use.
func Fingerprint(v any) (string, error) {
	_, d, err := canon.MarshalDigest(evidence.IdentityProjection(v))
	return d, err
}

// ModelLineage is the logical model family and its attributable
// publishers and derivatives.
type ModelLineage struct {
	Family      string   `json:"family" ev:"id"`
	Publishers  []string `json:"publishers" ev:"id"` // attributed namespaces
	Derivatives []string `json:"derivatives" ev:"display"`
}

// ArtifactSpec is one ArtifactIdentity plus every way it was found and
// everything needed to run it.
type ArtifactSpec struct {
	Identity                 artifact.Identity            `json:"identity" ev:"id"`
	Locators                 []artifact.Locator           `json:"locators" ev:"display"`
	Observations             []artifact.SourceObservation `json:"observations" ev:"display"`
	WeightManifestDigest     string                       `json:"weight_manifest_digest" ev:"id"`
	IndexDigest              *string                      `json:"index_digest" ev:"id"`
	ConfigDigest             string                       `json:"config_digest" ev:"id"`
	QuantizationConfigDigest *string                      `json:"quantization_config_digest" ev:"id"`
	TokenizerIdentity        *string                      `json:"tokenizer_identity" ev:"id"`
	ChatTemplateIdentity     *string                      `json:"chat_template_identity" ev:"id"`
	Lineage                  artifact.LineageFingerprint  `json:"lineage" ev:"id"`
	LicenseObservations      []artifact.AttributedClaim   `json:"license_observations" ev:"display"`
	ClaimedLineage           []artifact.AttributedClaim   `json:"claimed_lineage" ev:"display"`
	Quantization             QuantizationSpec             `json:"quantization" ev:"id"`
}

// Validate checks digests and the quantization spec.
func (s ArtifactSpec) Validate() error {
	if s.Identity.FileRule == "" || !canon.IsDigest(s.Identity.ContentDigest) {
		return errors.New("artifact spec: identity needs a file rule and a content digest (resolve the locator first)")
	}
	for name, d := range map[string]string{"weight_manifest_digest": s.WeightManifestDigest, "config_digest": s.ConfigDigest} {
		if !canon.IsDigest(d) {
			return fmt.Errorf("artifact spec: %s %q is not a digest", name, d)
		}
	}
	for name, d := range map[string]*string{"index_digest": s.IndexDigest, "quantization_config_digest": s.QuantizationConfigDigest, "tokenizer_identity": s.TokenizerIdentity, "chat_template_identity": s.ChatTemplateIdentity} {
		if d != nil && !canon.IsDigest(*d) {
			return fmt.Errorf("artifact spec: %s %q is not a digest", name, *d)
		}
	}
	if !canon.IsDigest(s.Lineage.TensorSetDigest) {
		return errors.New("artifact spec: lineage has no tensor set digest")
	}
	return s.Quantization.Validate()
}

// OfflineTransformSpec is a reproducible conversion; its result is a new
// ArtifactSpec.
type OfflineTransformSpec struct {
	Producer                string  `json:"producer" ev:"id"` // "llm-compressor", "autoawq", …
	Version                 string  `json:"version" ev:"id"`
	Recipe                  *string `json:"recipe" ev:"id"`
	CalibrationDataIdentity *string `json:"calibration_data_identity" ev:"id"`
	OutputArtifact          *string `json:"output_artifact_digest" ev:"id"`
}

// Runtime transform kinds.
const (
	RuntimeNone      = "none"
	RuntimeOnlineFP8 = "vllm_online_fp8"
	RuntimeOnlineBnB = "vllm_online_bitsandbytes"
)

// RuntimeTransformSpec is none, or an exact pinned-engine online
// conversion. It never invents a checkpoint.
type RuntimeTransformSpec struct {
	Kind             string   `json:"kind" ev:"id"`
	EngineVersion    *string  `json:"engine_version" ev:"id"`
	TargetLayerRules []string `json:"target_layer_rules" ev:"id"`
	Exclusions       []string `json:"exclusions" ev:"id"`
	Producer         *string  `json:"producer" ev:"id"`
	Version          *string  `json:"version" ev:"id"`
}

// ExecutionSpec is what the engine actually does with the artifact.
type ExecutionSpec struct {
	EngineImageDigest        string            `json:"engine_image_digest" ev:"id"`        // "sha256:<hex>" (OCI form)
	ResolvedCheckpointMethod string            `json:"resolved_checkpoint_method" ev:"id"` // vLLM's resolved method, e.g. "awq_marlin"
	ImplementationOverrides  map[string]string `json:"implementation_overrides" ev:"id"`
	Kernels                  SelectedKernels   `json:"selected_kernels" ev:"id"`
}

// SelectedKernels are the backends the engine chose (nil = not observed).
type SelectedKernels struct {
	Linear    *string `json:"linear" ev:"id"`
	MoE       *string `json:"moe" ev:"id"`
	Attention *string `json:"attention" ev:"id"`
}

// QuantizationSpec is the full scheme of a checkpoint (or of a runtime
// transform): distinct weight, activation and KV-cache formats, the
// linear and MoE schemes, packing, scales, zero points and exclusions.
// A nil pointer is "not stated by the checkpoint", never a default.
type QuantizationSpec struct {
	// Method is quant_method as the checkpoint spells it ("" for a native
	// checkpoint). narwhal addition to §2.6.2, per §3.4 "store quant_method
	// verbatim".
	Method                  string   `json:"method" ev:"id"`
	WeightFormat            string   `json:"weight_format" ev:"id"` // "bf16","fp8_e4m3","int4","fp4_e2m1","nf4",…
	ActivationFormat        *string  `json:"activation_format" ev:"id"`
	KVCacheFormat           *string  `json:"kv_cache_format" ev:"id"`
	LinearScheme            *string  `json:"linear_scheme" ev:"id"`
	MoEScheme               *string  `json:"moe_scheme" ev:"id"`
	Bits                    *int     `json:"bits" ev:"id"`
	GroupSize               *int     `json:"group_size" ev:"id"` // -1 = per channel
	BlockShape              []int    `json:"block_shape" ev:"id"`
	ScaleRepresentation     *string  `json:"scale_representation" ev:"id"`
	ZeroPointRepresentation *string  `json:"zero_point_representation" ev:"id"`
	ExcludedModules         []string `json:"excluded_modules" ev:"id"`
	CalibrationRecipe       *string  `json:"calibration_recipe" ev:"id"`
	CalibrationDataset      *string  `json:"calibration_dataset" ev:"id"`
	ProducerVersion         *string  `json:"producer_version" ev:"id"`
	// Workspaces are load-time memory the method's kernels need beyond
	// the checkpoint tensors (the Marlin repack); the calculator accounts
	// them. Derived facts, display.
	Workspaces []Workspace `json:"workspaces" ev:"display"`
}

// Workspace is memory a kernel path needs beyond the stored tensors.
type Workspace struct {
	Kind string `json:"kind"` // "marlin_repack"
	// When says when it applies, e.g. "vLLM selects the Marlin kernel
	// (compute capability >= 8.0)".
	When string `json:"when"`
	// Transient names the transient rule: "largest_packed_weight" = one
	// extra copy of the largest packed weight partition while it is
	// repacked (layers are processed one at a time).
	Transient string `json:"transient"`
	// PerLinear are tensors kept per quantized linear after loading,
	// as "name dtype [dims]" with dims in terms of in/out features of the
	// partition, e.g. "g_idx_sort_indices I32 [in]".
	PerLinear []string `json:"per_linear"`
	Source    string   `json:"source"` // URL of the engine code the rule comes from
}

// Validate rejects a spec that is only a name.
func (q QuantizationSpec) Validate() error {
	if q.WeightFormat == "" {
		return errors.New("quantization spec: weight_format is empty; a quantization is a full spec, not a method name")
	}
	if q.Bits != nil && (*q.Bits <= 0 || *q.Bits > 64) {
		return fmt.Errorf("quantization spec: bits %d out of range", *q.Bits)
	}
	if !slices.IsSorted(q.ExcludedModules) {
		return errors.New("quantization spec: excluded_modules must be sorted")
	}
	return nil
}

// DecodeQuantizationSpec reads a QuantizationSpec record strictly: an
// object with every field present and no others. A bare method string
// ("awq") or a partial object is refused.
func DecodeQuantizationSpec(b []byte) (QuantizationSpec, error) {
	var q QuantizationSpec
	if err := decodeStrict(b, &q); err != nil {
		return q, fmt.Errorf("quantization spec: %w", err)
	}
	return q, q.Validate()
}

// decodeStrict decodes a canonical-checked JSON object into v, requiring
// every json field of v's struct type and refusing unknown ones.
func decodeStrict(b []byte, v any) error {
	if _, err := canon.Canonicalize(b); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return errors.New("want a JSON object with every field of the record, not " + firstToken(b))
	}
	want, err := canon.Marshal(v)
	if err != nil {
		return err
	}
	var wantFields map[string]json.RawMessage
	json.Unmarshal(want, &wantFields)
	for k := range wantFields {
		if _, ok := fields[k]; !ok {
			return fmt.Errorf("field %q missing (every record field is always present)", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func firstToken(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 20 {
		b = b[:20]
	}
	return string(b)
}

// Evidence states a CompatibilityEvidence record may reach (§2.7).
var endpointStates = []string{"artifact_resolved", "boot_verified", "engine_config_validated", "format_detected", "serving_verified"}

// QualityEvidence is a separately scoped record on a candidate and an
// execution; it references the task attempts, application and evaluation
// protocol that produced it (ADR-011).
type QualityEvidence struct {
	CandidateFingerprint          string   `json:"candidate_fingerprint" ev:"id"`
	ExecutionFingerprint          string   `json:"execution_fingerprint" ev:"id"`
	TaskAttemptFingerprints       []string `json:"task_attempt_fingerprints" ev:"id"`
	ApplicationFingerprint        string   `json:"application_fingerprint" ev:"id"`
	EvaluationProtocolFingerprint string   `json:"evaluation_protocol_fingerprint" ev:"id"`
	AggregateScore                *float64 `json:"aggregate_score" ev:"display"`
}

// NewQualityEvidence builds a quality record; it cannot exist without the
// attempts behind it.
func NewQualityEvidence(candidate, execution string, attempts []string, application, protocol string, score *float64) (QualityEvidence, error) {
	if len(attempts) == 0 {
		return QualityEvidence{}, errors.New("quality evidence: no task attempts; a score without the attempts that produced it is refused (ADR-011)")
	}
	for _, d := range append([]string{candidate, execution, application, protocol}, attempts...) {
		if !canon.IsDigest(d) {
			return QualityEvidence{}, fmt.Errorf("quality evidence: %q is not a fingerprint", d)
		}
	}
	sorted := slices.Clone(attempts)
	slices.Sort(sorted)
	return QualityEvidence{candidate, execution, slices.Compact(sorted), application, protocol, score}, nil
}

// CompatibilityEvidence records the endpoint state a candidate reached on
// an execution.
type CompatibilityEvidence struct {
	CandidateFingerprint string  `json:"candidate_fingerprint" ev:"id"`
	ExecutionFingerprint string  `json:"execution_fingerprint" ev:"id"`
	State                string  `json:"state" ev:"id"`
	Compatible           bool    `json:"compatible" ev:"id"`
	Failure              *string `json:"failure_fingerprint" ev:"id"` // when not compatible
}

// Validate checks the state and that an incompatible record names its failure.
func (c CompatibilityEvidence) Validate() error {
	if !slices.Contains(endpointStates, c.State) {
		return fmt.Errorf("compatibility evidence: state %q is not one of %v", c.State, endpointStates)
	}
	if !canon.IsDigest(c.CandidateFingerprint) || !canon.IsDigest(c.ExecutionFingerprint) {
		return errors.New("compatibility evidence: candidate and execution fingerprints are required")
	}
	if !c.Compatible && (c.Failure == nil || !canon.IsDigest(*c.Failure)) {
		return errors.New("compatibility evidence: an incompatible result needs its failure fingerprint")
	}
	if c.Compatible && c.Failure != nil {
		return errors.New("compatibility evidence: a compatible result carries no failure")
	}
	return nil
}

// CandidateClass is one of the five candidate classes of one contract.
type CandidateClass string

const (
	CheckpointNative              CandidateClass = "checkpoint_native"
	PublisherQuantization         CandidateClass = "publisher_quantization"
	ThirdPartySibling             CandidateClass = "third_party_sibling"
	ReproducibleOfflineConversion CandidateClass = "reproducible_offline_conversion"
	RuntimeTransform              CandidateClass = "runtime_transform"
)

// Candidate is a node of the graph: an artifact, a runtime transform, and
// the offline transform that produced the artifact when there is one.
type Candidate struct {
	Class      CandidateClass       `json:"class" ev:"id"`
	Artifact   string               `json:"artifact" ev:"id"` // ArtifactSpec fingerprint
	Runtime    RuntimeTransformSpec `json:"runtime_transform" ev:"id"`
	ProducedBy *string              `json:"produced_by" ev:"id"` // OfflineTransformSpec fingerprint
}

// NoRuntimeTransform is the runtime transform of a checkpoint served as is.
func NoRuntimeTransform() RuntimeTransformSpec {
	return RuntimeTransformSpec{Kind: RuntimeNone, TargetLayerRules: []string{}, Exclusions: []string{}}
}

// CheckpointCandidate is a checkpoint served as stored.
func CheckpointCandidate(class CandidateClass, spec ArtifactSpec) (Candidate, error) {
	if class == ReproducibleOfflineConversion || class == RuntimeTransform {
		return Candidate{}, fmt.Errorf("candidate class %s needs its transform; use OfflineConversion or RuntimeCandidate", class)
	}
	if err := spec.Validate(); err != nil {
		return Candidate{}, err
	}
	fp, err := Fingerprint(spec)
	if err != nil {
		return Candidate{}, err
	}
	return Candidate{Class: class, Artifact: fp, Runtime: NoRuntimeTransform()}, nil
}

// OfflineConversion records a conversion of input into output: output
// must be a different artifact (an offline conversion makes a new one).
// It returns the candidate and the transform with its output bound; no
// relation is created — reproducibly_derived_from needs a reproduction
// (ReproducedRelation).
func OfflineConversion(input ArtifactSpec, t OfflineTransformSpec, output ArtifactSpec) (Candidate, OfflineTransformSpec, error) {
	if err := output.Validate(); err != nil {
		return Candidate{}, t, err
	}
	if t.Producer == "" || t.Version == "" {
		return Candidate{}, t, errors.New("offline transform: producer and version are required")
	}
	if input.Identity.ContentDigest == output.Identity.ContentDigest {
		return Candidate{}, t, errors.New("offline transform: output has the input's identity; a conversion makes a new artifact")
	}
	out, err := Fingerprint(output)
	if err != nil {
		return Candidate{}, t, err
	}
	t.OutputArtifact = &out
	tf, err := Fingerprint(t)
	if err != nil {
		return Candidate{}, t, err
	}
	return Candidate{Class: ReproducibleOfflineConversion, Artifact: out, Runtime: NoRuntimeTransform(), ProducedBy: &tf}, t, nil
}

// RuntimeCandidate is base served through an online conversion: the
// candidate points at the unchanged base artifact; no ArtifactSpec is made.
func RuntimeCandidate(base ArtifactSpec, rt RuntimeTransformSpec) (Candidate, error) {
	if rt.Kind == "" || rt.Kind == RuntimeNone {
		return Candidate{}, errors.New("runtime candidate: needs a runtime transform other than none")
	}
	if rt.EngineVersion == nil || *rt.EngineVersion == "" {
		return Candidate{}, errors.New("runtime candidate: the transform must pin the engine version it is exact for")
	}
	fp, err := Fingerprint(base)
	if err != nil {
		return Candidate{}, err
	}
	return Candidate{Class: RuntimeTransform, Artifact: fp, Runtime: rt}, nil
}
