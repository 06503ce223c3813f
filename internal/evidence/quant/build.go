package quant

import (
	"errors"
	"slices"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// SpecInputs are the values an ArtifactSpec is built from; the artifact
// package reads them.
type SpecInputs struct {
	Observation  artifact.LocalObservation
	Headers      artifact.Headers
	Config       []byte                // config.json bytes
	QuantConfig  *artifact.QuantConfig // nil for an unquantized checkpoint
	Quantization QuantizationSpec
}

// fileDigest is the multihash form of a file's SHA-256 (file bytes are
// content-addressed as they are; they are not records).
func fileDigest(sha string) string { return canon.DigestPrefix + sha }

// NewArtifactSpec builds the ArtifactSpec of a resolved local artifact.
// It refuses an unresolved observation: identity comes from resolved
// contents only (INV-33).
func NewArtifactSpec(in SpecInputs) (ArtifactSpec, error) {
	o := in.Observation
	if o.Identity == nil || o.Observation == nil {
		return ArtifactSpec{}, errors.New("artifact spec: " + orText(o.Reason, "the artifact is not resolved"))
	}
	byPath := map[string]artifact.FileDigest{}
	for _, f := range o.Observation.Files {
		byPath[f.Path] = f
	}
	weights := slices.Clone(in.Headers.Files)
	var index *string
	if f, ok := byPath[artifact.IndexFile]; ok {
		weights = append(weights, artifact.IndexFile)
		index = ptr(fileDigest(f.SHA256))
	}
	var manifest []artifact.FileDigest
	for _, p := range weights {
		f, ok := byPath[p]
		if !ok {
			return ArtifactSpec{}, errors.New("artifact spec: weight file " + p + " is not in the resolved file list")
		}
		manifest = append(manifest, f)
	}
	wm, err := artifact.ManifestDigest(manifest)
	if err != nil {
		return ArtifactSpec{}, err
	}
	cd, reason := artifact.ConfigDigest(in.Config)
	if cd == nil {
		return ArtifactSpec{}, errors.New("artifact spec: " + reason)
	}
	lineage, err := artifact.Lineage(in.Headers, in.Config, o.Observation.Files, o.Observation.ResolvedRevision)
	if err != nil {
		return ArtifactSpec{}, err
	}
	s := ArtifactSpec{
		Identity: *o.Identity, Locators: []artifact.Locator{o.Locator}, Observations: []artifact.SourceObservation{*o.Observation},
		WeightManifestDigest: wm, IndexDigest: index, ConfigDigest: *cd,
		TokenizerIdentity: lineage.TokenizerDigest, ChatTemplateIdentity: artifact.ChatTemplateDigest(o.Observation.Files),
		Lineage: lineage, LicenseObservations: []artifact.AttributedClaim{}, ClaimedLineage: []artifact.AttributedClaim{},
		Quantization: in.Quantization,
	}
	if in.QuantConfig != nil {
		s.QuantizationConfigDigest = &in.QuantConfig.Digest
	}
	return s, s.Validate()
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
