package sign

import (
	"encoding/json"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/evidence"
)

// Statement types. The predicate type URIs are narwhal's and provisional
// until the record schema is published (reference §3.6.1).
const (
	StatementType        = "https://in-toto.io/Statement/v1"
	RecordPredicateType  = "urn:narwhal:predicate:evidence-record:v1"
	ReleasePredicateType = "urn:narwhal:predicate:evidence-release:v1"
)

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is one statement subject; consumers match it by digest only.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// RecordPredicate carries the signed record itself, so an envelope is
// self-contained and its payload is over the record's canonical bytes.
type RecordPredicate struct {
	Record json.RawMessage `json:"record"`
}

// ReleasePredicate carries the manifest of a release view.
type ReleasePredicate struct {
	Manifest       json.RawMessage `json:"manifest"`
	ManifestDigest string          `json:"manifest_digest"`
}

type schemaProbe struct {
	Schema string         `json:"schema"`
	Kind   evidence.Kind  `json:"kind"`
	Claim  evidence.Claim `json:"claim"`
}

// StatementFor builds the Statement for a record or a release manifest
// from its bytes, which must already be canonical (INV-43): the subject
// digest is then the record's own identity.
func StatementFor(canonical []byte) (Statement, error) {
	d, err := canon.VerifiedDigest(canonical)
	if err != nil {
		return Statement{}, fmt.Errorf("statement: %w", err)
	}
	var p schemaProbe
	if err := json.Unmarshal(canonical, &p); err != nil {
		return Statement{}, fmt.Errorf("statement: %w", err)
	}
	if p.Schema == evidence.ReleaseSchema {
		return releaseStatement(canonical, d)
	}
	if p.Schema != evidence.RecordSchema {
		return Statement{}, fmt.Errorf("statement: schema %q: want %q or %q", p.Schema, evidence.RecordSchema, evidence.ReleaseSchema)
	}
	pred, err := json.Marshal(RecordPredicate{Record: canonical})
	if err != nil {
		return Statement{}, err
	}
	name := evidence.RecordSchema + ":" + string(p.Kind) + "/" + p.Claim.Quantity
	return Statement{Type: StatementType, Subject: []Subject{subject(name, d)}, PredicateType: RecordPredicateType, Predicate: pred}, nil
}

// releaseStatement is the in-toto view of a release manifest: the manifest
// and every record it lists are subjects, so one signature covers them all.
func releaseStatement(canonical []byte, d string) (Statement, error) {
	var r evidence.Release
	if err := json.Unmarshal(canonical, &r); err != nil {
		return Statement{}, fmt.Errorf("release statement: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Statement{}, err
	}
	subs := []Subject{subject(evidence.ReleaseSchema+":"+r.Name, d)}
	for _, rd := range r.RecordDigests {
		subs = append(subs, subject(evidence.RecordSchema+":"+rd, rd))
	}
	pred, err := json.Marshal(ReleasePredicate{Manifest: canonical, ManifestDigest: d})
	if err != nil {
		return Statement{}, err
	}
	return Statement{Type: StatementType, Subject: subs, PredicateType: ReleasePredicateType, Predicate: pred}, nil
}

func subject(name, digest string) Subject {
	return Subject{Name: name, Digest: map[string]string{"sha256": digest[4:]}}
}

// Encode is the Statement's canonical JSON, the DSSE payload, so the same
// record always gives the same payload bytes.
func (s Statement) Encode() ([]byte, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return canon.Canonicalize(raw)
}

// Covers reports whether digest (1220…) is one of the subjects.
func (s Statement) Covers(digest string) bool {
	if !canon.IsDigest(digest) {
		return false
	}
	for _, sub := range s.Subject {
		if sub.Digest["sha256"] == digest[4:] {
			return true
		}
	}
	return false
}

// SubjectDigests lists the subjects as 1220… digests, for messages.
func (s Statement) SubjectDigests() []string {
	var out []string
	for _, sub := range s.Subject {
		if h := sub.Digest["sha256"]; h != "" {
			out = append(out, "1220"+h)
		}
	}
	return out
}
