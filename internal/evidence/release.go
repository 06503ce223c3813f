package evidence

import (
	"fmt"
	"sort"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Release manifest identity (INV-35): a release is its manifest's digest,
// never a host URL.
//
// Schema version 2 states both data licences (ADR-006, ADR-002): the
// records' CDLA-Permissive-2.0 and the documentation's CC-BY-4.0. A
// version 1 manifest, which named the records' licence only, still reads.
const (
	ReleaseSchema        = "narwhal.evidence-release"
	ReleaseSchemaVersion = 2
	// DocumentationLicense is the licence of narwhal's documentation
	// (docs/LICENSE.md); evidence records are License.
	DocumentationLicense = "CC-BY-4.0"
)

// Release lists the records of one release.
type Release struct {
	Schema        string `json:"schema" ev:"id"`
	SchemaVersion int    `json:"schema_version" ev:"display"`
	Name          string `json:"name" ev:"display"`
	License       string `json:"license" ev:"display"`
	// DocumentationLicense is absent (empty) in version 1 manifests.
	DocumentationLicense string   `json:"documentation_license" ev:"display"`
	RecordDigests        []string `json:"record_digests" ev:"id"`
}

// NewRelease builds a manifest over digests, sorted and de-duplicated so
// the same set always gives the same release digest.
func NewRelease(name string, digests []string) (Release, error) {
	ds := append([]string(nil), digests...)
	sort.Strings(ds)
	ds = dedupe(ds)
	for _, d := range ds {
		if !canon.IsDigest(d) {
			return Release{}, fmt.Errorf("release %q: %q is not a 1220… record digest", name, d)
		}
	}
	return Release{Schema: ReleaseSchema, SchemaVersion: ReleaseSchemaVersion, Name: name, License: License, DocumentationLicense: DocumentationLicense, RecordDigests: ds}, nil
}

// Validate checks a manifest read from outside.
func (r Release) Validate() error {
	if err := checkSchema(r.Schema, r.SchemaVersion, ReleaseSchema, ReleaseSchemaVersion); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	switch {
	case r.License != License:
		return fmt.Errorf("release: license %q: evidence records are %s", r.License, License)
	case r.SchemaVersion >= 2 && r.DocumentationLicense != DocumentationLicense:
		return fmt.Errorf("release: documentation_license %q: narwhal's documentation is %s", r.DocumentationLicense, DocumentationLicense)
	case !sort.StringsAreSorted(r.RecordDigests):
		return fmt.Errorf("release: record_digests must be sorted")
	}
	for i, d := range r.RecordDigests {
		if !canon.IsDigest(d) {
			return fmt.Errorf("release: record_digests[%d] %q is not a 1220… digest", i, d)
		}
	}
	return nil
}

// Encode returns the manifest's canonical bytes and its digest, the
// release identity.
func (r Release) Encode() ([]byte, string, error) {
	if err := r.Validate(); err != nil {
		return nil, "", err
	}
	return canon.MarshalDigest(r)
}
