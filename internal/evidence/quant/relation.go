package quant

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence/artifact"
)

// RelationKind is one of the six typed edges between artifacts.
type RelationKind string

const (
	PublishedByOwner           RelationKind = "published_by_owner"
	ClaimedDerivedFrom         RelationKind = "claimed_derived_from"
	ReproduciblyDerivedFrom    RelationKind = "reproducibly_derived_from"
	StructurallyCompatibleWith RelationKind = "structurally_compatible_with"
	QualityComparedWith        RelationKind = "quality_compared_with"
	TokenizerCompatibleWith    RelationKind = "tokenizer_compatible_with"
)

// RelationKinds lists the six kinds.
var RelationKinds = []RelationKind{PublishedByOwner, ClaimedDerivedFrom, ReproduciblyDerivedFrom, StructurallyCompatibleWith, QualityComparedWith, TokenizerCompatibleWith}

// ArtifactRelation is an evidenced edge. Evidence holds the fingerprints
// or digests of what establishes it and is never empty.
type ArtifactRelation struct {
	Kind        RelationKind              `json:"relation" ev:"id"`
	From        string                    `json:"from" ev:"id"` // ArtifactSpec fingerprint
	To          string                    `json:"to" ev:"id"`
	Evidence    []string                  `json:"evidence" ev:"id"`
	Attribution *artifact.AttributedClaim `json:"attribution" ev:"id"` // for claimed_* and published_by_owner
}

// Validate enforces the relation rules every edge must meet.
func (r ArtifactRelation) Validate() error {
	if !slices.Contains(RelationKinds, r.Kind) {
		return fmt.Errorf("relation %q: not one of the six kinds", r.Kind)
	}
	if !canon.IsDigest(r.From) || !canon.IsDigest(r.To) {
		return fmt.Errorf("relation %s: from and to must be artifact fingerprints", r.Kind)
	}
	if r.From == r.To {
		return fmt.Errorf("relation %s: an artifact is not related to itself", r.Kind)
	}
	if len(r.Evidence) == 0 {
		return fmt.Errorf("relation %s: no evidence; a relation without evidence references is refused", r.Kind)
	}
	for _, e := range r.Evidence {
		if !canon.IsDigest(e) {
			return fmt.Errorf("relation %s: evidence %q is not a digest", r.Kind, e)
		}
	}
	needsClaim := r.Kind == ClaimedDerivedFrom || r.Kind == PublishedByOwner
	if needsClaim && (r.Attribution == nil || r.Attribution.Source == "" || r.Attribution.Value == "") {
		return fmt.Errorf("relation %s: needs an attributed claim (who says so, where)", r.Kind)
	}
	return nil
}

func relation(kind RelationKind, from, to ArtifactSpec, evidence []string, claim *artifact.AttributedClaim) (ArtifactRelation, error) {
	f, err := Fingerprint(from)
	if err != nil {
		return ArtifactRelation{}, err
	}
	t, err := Fingerprint(to)
	if err != nil {
		return ArtifactRelation{}, err
	}
	ev := slices.Clone(evidence)
	slices.Sort(ev)
	r := ArtifactRelation{Kind: kind, From: f, To: t, Evidence: slices.Compact(ev), Attribution: claim}
	return r, r.Validate()
}

// StructuralRelation relates two artifacts whose lineage fingerprints
// have one tensor schema (§2.4 SameSchema). It says nothing about
// weights. ok is false when the schemas differ.
func StructuralRelation(a, b ArtifactSpec) (ArtifactRelation, bool, error) {
	if !artifact.SameSchema(a.Lineage, b.Lineage) {
		return ArtifactRelation{}, false, nil
	}
	la, err := Fingerprint(a.Lineage)
	if err != nil {
		return ArtifactRelation{}, false, err
	}
	lb, err := Fingerprint(b.Lineage)
	if err != nil {
		return ArtifactRelation{}, false, err
	}
	r, err := relation(StructurallyCompatibleWith, a, b, []string{la, lb}, nil)
	return r, err == nil, err
}

// TokenizerRelation relates two artifacts with equal tokenizer digests,
// or with a recorded round-trip check (roundTrip, a record digest). ok is
// false when neither holds.
func TokenizerRelation(a, b ArtifactSpec, roundTrip *string) (ArtifactRelation, bool, error) {
	var ev []string
	switch {
	case a.TokenizerIdentity != nil && b.TokenizerIdentity != nil && *a.TokenizerIdentity == *b.TokenizerIdentity:
		ev = []string{*a.TokenizerIdentity}
	case roundTrip != nil:
		ev = []string{*roundTrip}
	default:
		return ArtifactRelation{}, false, nil
	}
	r, err := relation(TokenizerCompatibleWith, a, b, ev, nil)
	return r, err == nil, err
}

// ClaimedRelation records an attributed derivation claim (model card
// base_model, a Hub model-tree relation). It stays a claim forever;
// evidence is the digest of the record holding the claim.
func ClaimedRelation(derived, base ArtifactSpec, claim artifact.AttributedClaim, claimRecord string) (ArtifactRelation, error) {
	return relation(ClaimedDerivedFrom, derived, base, []string{claimRecord}, &claim)
}

// ReproducedRelation links output to input only when a run of t
// reproduced an artifact whose identity equals the published output's.
// reproduction is the digest of the record of that run.
func ReproducedRelation(input, published ArtifactSpec, t OfflineTransformSpec, reproduced artifact.Identity, reproduction string) (ArtifactRelation, error) {
	if reproduced.FileRule != published.Identity.FileRule || reproduced.ContentDigest != published.Identity.ContentDigest {
		return ArtifactRelation{}, errors.New("reproducibly_derived_from: the reproduced identity differs from the published artifact's; the derivation is not reproduced")
	}
	tf, err := Fingerprint(t)
	if err != nil {
		return ArtifactRelation{}, err
	}
	return relation(ReproduciblyDerivedFrom, published, input, []string{tf, reproduction}, nil)
}

// QualityRelation relates two artifacts compared under one evaluation
// protocol; each QualityEvidence must be about one of the two candidates.
func QualityRelation(a, b ArtifactSpec, qa, qb QualityEvidence) (ArtifactRelation, error) {
	if qa.EvaluationProtocolFingerprint != qb.EvaluationProtocolFingerprint {
		return ArtifactRelation{}, errors.New("quality_compared_with: the two records use different evaluation protocols")
	}
	fa, err := Fingerprint(qa)
	if err != nil {
		return ArtifactRelation{}, err
	}
	fb, err := Fingerprint(qb)
	if err != nil {
		return ArtifactRelation{}, err
	}
	return relation(QualityComparedWith, a, b, []string{fa, fb}, nil)
}

// OwnerRelation records that obs found spec under the namespace of a
// publisher that owns lineage: the locator's repository owner must be one
// of lineage.Publishers. evidence is the digest of the observation record.
func OwnerRelation(spec, owner ArtifactSpec, lineage ModelLineage, loc artifact.Locator, evidence string, observedAt string) (ArtifactRelation, error) {
	ns, _, ok := strings.Cut(loc.URI, "/")
	if loc.SourceKind != artifact.SourceHuggingFace || !ok || !slices.Contains(lineage.Publishers, ns) {
		return ArtifactRelation{}, fmt.Errorf("published_by_owner: %s %q is not under a namespace of the %s lineage's publishers", loc.SourceKind, loc.URI, lineage.Family)
	}
	claim := artifact.AttributedClaim{Claim: "publisher_namespace", Value: ns, Source: "source_observation", ObservedAt: observedAt}
	return relation(PublishedByOwner, spec, owner, []string{evidence}, &claim)
}

// Relate derives every relation the evidence carried by two specs
// supports on its own: structural compatibility from lineage and
// tokenizer compatibility from equal tokenizer digests. Names, locators
// and similar shapes beyond schema equality create nothing.
func Relate(a, b ArtifactSpec) ([]ArtifactRelation, error) {
	var out []ArtifactRelation
	if r, ok, err := StructuralRelation(a, b); err != nil {
		return nil, err
	} else if ok {
		out = append(out, r)
	}
	if r, ok, err := TokenizerRelation(a, b, nil); err != nil {
		return nil, err
	} else if ok {
		out = append(out, r)
	}
	return out, nil
}
