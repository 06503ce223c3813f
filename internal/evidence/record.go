// Package evidence holds narwhal's evidence records (ADR-006): the common
// envelope, evidence levels and the conflict rule, freshness clocks, vLLM
// version ordering and output-tier derivation.
//
// The package is deterministic (INV-42): time comes only from a
// ports.Clock passed in, and every function here is a pure function of its
// arguments, so the same inputs give byte-identical records and digests.
// Storage lives in the store subpackage.
//
// # Rules for record types
//
// Records are encoded with canon.Marshal, never encoding/json directly:
//
//   - every field is always present: no omitempty (canon.Marshal refuses
//     it), an absent optional value is a nil pointer (null), an empty
//     collection is [] or {};
//   - every field is tagged ev:"id" or ev:"display"; the fingerprint hashes
//     the identity projection only, the digest hashes the whole record;
//   - integers stay within ±2^53, floats are finite, timestamps are RFC 3339
//     UTC strings from the injected Clock, enumerations are snake_case;
//   - subject and display keys are ASCII, so every JCS implementation orders
//     them the same way.
package evidence

import (
	"fmt"
	"time"

	"github.com/narwhal-go/narwhal/internal/canon"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// Envelope constants.
const (
	RecordSchema        = "narwhal.evidence.record"
	RecordSchemaVersion = 1
	License             = "CDLA-Permissive-2.0"
)

// Record is the common evidence envelope.
type Record struct {
	Schema          string            `json:"schema" ev:"id"`
	SchemaVersion   int               `json:"schema_version" ev:"display"`
	Kind            Kind              `json:"kind" ev:"id"`
	ClaimScope      ClaimScope        `json:"claim_scope" ev:"id"`
	EpistemicStatus EpistemicStatus   `json:"epistemic_status" ev:"id"`
	Level           Level             `json:"level" ev:"id"`
	Subject         map[string]string `json:"subject" ev:"id"`
	Claim           Claim             `json:"claim" ev:"id"`
	Engine          Engine            `json:"engine" ev:"id"`
	Provenance      Provenance        `json:"provenance" ev:"id"`
	Corrects        *string           `json:"corrects" ev:"id"`
	ObservedAt      string            `json:"observed_at" ev:"display"`
	License         string            `json:"license" ev:"display"`
	Display         map[string]any    `json:"display" ev:"display"`
}

// Claim is what the record asserts about its subject: a categorical
// verdict, a numeric value, or both.
type Claim struct {
	Quantity  string   `json:"quantity" ev:"id"`
	Verdict   *string  `json:"verdict" ev:"id"`
	Value     *float64 `json:"value" ev:"id"`
	Unit      string   `json:"unit" ev:"id"`
	Tolerance float64  `json:"tolerance" ev:"id"`
}

// Engine is the engine identity a record was observed at; freshness and
// the within-level conflict rule read it.
type Engine struct {
	Name     string   `json:"name" ev:"id"`
	Version  string   `json:"version" ev:"id"`
	Packages []string `json:"packages" ev:"id"` // "name@version", for advisories
}

// Provenance says who produced the record and from what.
type Provenance struct {
	Producer        string   `json:"producer" ev:"id"`
	ProducerVersion string   `json:"producer_version" ev:"display"`
	Inputs          []string `json:"inputs" ev:"id"` // digests of input records or files
}

// Stamp fills the envelope constants and observed_at from the clock port.
func Stamp(r Record, clock ports.Clock) Record {
	r.Schema, r.SchemaVersion, r.License = RecordSchema, RecordSchemaVersion, License
	r.ObservedAt = clock.Now().UTC().Format(time.RFC3339Nano)
	return r
}

// Encode validates r and returns its canonical bytes and digest.
func Encode(r Record) ([]byte, string, error) {
	if err := r.Validate(); err != nil {
		return nil, "", err
	}
	b, d, err := canon.MarshalDigest(r)
	if err != nil {
		return nil, "", fmt.Errorf("record: %w", err)
	}
	return b, d, nil
}

// Digest is the digest of the whole canonical record.
func (r Record) Digest() (string, error) {
	_, d, err := Encode(r)
	return d, err
}
