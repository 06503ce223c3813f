package evidence

import (
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Validate checks the envelope. Errors name the field and the fix.
func (r Record) Validate() error {
	checks := []func(Record) error{checkHeader, checkEnums, checkEpistemic, checkSubject, checkClaim, checkRefs, checkObservedAt}
	for _, c := range checks {
		if err := c(r); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	return nil
}

func checkHeader(r Record) error {
	if err := checkSchema(r.Schema, r.SchemaVersion, RecordSchema, RecordSchemaVersion); err != nil {
		return err
	}
	if r.License != License {
		return fmt.Errorf("license %q: evidence records are %s", r.License, License)
	}
	return nil
}

// checkSchema refuses another schema, and a version this build cannot
// read: a newer one (upgrade narwhal) or one below 1.
func checkSchema(schema string, version int, want string, wantVersion int) error {
	switch {
	case schema != want:
		return fmt.Errorf("schema %q: want %q", schema, want)
	case version > wantVersion:
		return fmt.Errorf("schema_version %d is newer than this narwhal reads (%d); upgrade narwhal", version, wantVersion)
	case version < 1:
		return fmt.Errorf("schema_version %d: want %d", version, wantVersion)
	}
	return nil
}

func checkEnums(r Record) error {
	switch {
	case !kinds[r.Kind]:
		return fmt.Errorf("kind %q is not a known evidence kind", r.Kind)
	case !scopes[r.ClaimScope]:
		return fmt.Errorf("claim_scope %q is not a known claim scope", r.ClaimScope)
	case !statuses[r.EpistemicStatus]:
		return fmt.Errorf("epistemic_status %q: want derived, proven_constraint, predicted or measured", r.EpistemicStatus)
	case !r.Level.Valid():
		return fmt.Errorf("level %q is not an evidence level", r.Level)
	}
	return nil
}

// checkEpistemic keeps the level honest about how the claim is known: a
// calculation cannot claim a measurement and a measurement is never
// "calculated only" (INV-1).
func checkEpistemic(r Record) error {
	if r.Level == CalculatedOnly && r.EpistemicStatus == Measured {
		return fmt.Errorf("epistemic_status measured at level calculated_only: a calculation is derived or predicted")
	}
	if r.Kind == KindPrediction && r.EpistemicStatus != Predicted {
		return fmt.Errorf("kind prediction needs epistemic_status predicted, not %q", r.EpistemicStatus)
	}
	return nil
}

func checkSubject(r Record) error {
	if len(r.Subject) == 0 {
		return fmt.Errorf("subject is empty: name what the record is about (for example %q)", SubjectArtifact)
	}
	for k := range r.Subject {
		if !isASCII(k) || k == "" {
			return fmt.Errorf("subject key %q: keys are non-empty ASCII", k)
		}
	}
	for k := range r.Display {
		if !isASCII(k) {
			return fmt.Errorf("display key %q: keys are ASCII", k)
		}
	}
	return nil
}

func checkClaim(r Record) error {
	c := r.Claim
	switch {
	case c.Quantity == "":
		return fmt.Errorf("claim.quantity is empty: name what is claimed")
	case c.Verdict == nil && c.Value == nil:
		return fmt.Errorf("claim %q has neither verdict nor value", c.Quantity)
	case c.Tolerance < 0:
		return fmt.Errorf("claim.tolerance %v is negative", c.Tolerance)
	}
	return nil
}

func checkRefs(r Record) error {
	for i, d := range r.Provenance.Inputs {
		if !canon.IsDigest(d) {
			return fmt.Errorf("provenance.inputs[%d] %q is not a 1220… digest", i, d)
		}
	}
	if r.Corrects != nil && !canon.IsDigest(*r.Corrects) {
		return fmt.Errorf("corrects %q is not a 1220… record digest", *r.Corrects)
	}
	if r.Provenance.Producer == "" {
		return fmt.Errorf("provenance.producer is empty")
	}
	return nil
}

func checkObservedAt(r Record) error {
	t, err := time.Parse(time.RFC3339Nano, r.ObservedAt)
	if err != nil || t.Location() != time.UTC || r.ObservedAt[len(r.ObservedAt)-1] != 'Z' {
		return fmt.Errorf("observed_at %q: want an RFC 3339 UTC time ending in Z (Stamp sets it from the clock)", r.ObservedAt)
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
