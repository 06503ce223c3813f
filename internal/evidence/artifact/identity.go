package artifact

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Schema versions of the artifact record types.
const (
	LocatorSchemaVersion     = 1
	ObservationSchemaVersion = 1
	IdentitySchemaVersion    = 1
)

// FileRuleV1 is narwhal's file rule: every regular file of the resolved
// revision except the root README.md and anything under
// .cache/huggingface/ (reference/evidence.md §2.5.3).
const FileRuleV1 = "narwhal.v1"

// Source kinds a Locator may name.
const (
	SourceLocal       = "local"
	SourceHuggingFace = "huggingface"
	SourceOCI         = "oci"
	SourceS3          = "s3"
	SourceHTTP        = "http"
)

var sourceKinds = []string{SourceHTTP, SourceHuggingFace, SourceLocal, SourceOCI, SourceS3}

// Locator says where to look: a location, never an identity.
type Locator struct {
	SchemaVersion     int     `json:"schema_version" ev:"display"`
	SourceKind        string  `json:"source_kind" ev:"id"`
	URI               string  `json:"uri" ev:"id"`
	RequestedRevision *string `json:"requested_revision" ev:"id"`
}

// FileDigest is one file of a resolved revision.
type FileDigest struct {
	Path      string `json:"path" ev:"id"`   // POSIX, relative, no "..", no normalization applied
	SHA256    string `json:"sha256" ev:"id"` // 64 lower-case hex
	SizeBytes int64  `json:"size_bytes" ev:"id"`
}

// AttributedClaim is something a source says, kept with who said it.
type AttributedClaim struct {
	Claim      string `json:"claim" ev:"id"` // "base_model", "license", "hf_snapshot_revision", …
	Value      string `json:"value" ev:"id"`
	Source     string `json:"source" ev:"id"` // "model_card", "config.json", "hf_cache_path", …
	ObservedAt string `json:"observed_at" ev:"display"`
}

// SourceObservation is what one resolution of a Locator found.
type SourceObservation struct {
	SchemaVersion    int               `json:"schema_version" ev:"display"`
	SourceKind       string            `json:"source_kind" ev:"id"`
	ResolvedRevision string            `json:"resolved_revision" ev:"id"` // immutable
	ManifestDigest   *string           `json:"manifest_digest" ev:"id"`
	Files            []FileDigest      `json:"file_digests" ev:"id"`
	LicenseObserved  *string           `json:"license_observed" ev:"display"`
	GatingObserved   *string           `json:"gating_observed" ev:"display"` // "none","auto","manual"
	PublisherClaims  []AttributedClaim `json:"publisher_claims" ev:"display"`
	ObservedAt       string            `json:"observed_at" ev:"display"`
}

// Identity is derived from resolved contents and structure only.
type Identity struct {
	SchemaVersion            int     `json:"schema_version" ev:"display"`
	FileRule                 string  `json:"file_rule" ev:"id"`
	ContentDigest            string  `json:"content_digest" ev:"id"`
	ComponentStructureDigest *string `json:"component_structure_digest" ev:"id"`
}

// Component is one part of a multi-component artifact (a main model and a
// draft model, adapters).
type Component struct {
	Role          string
	ContentDigest string
}

// IncludedV1 reports whether a relative POSIX path belongs to the
// narwhal.v1 file set.
func IncludedV1(p string) bool {
	return p != "README.md" && !strings.HasPrefix(p, ".cache/huggingface/")
}

// checkFiles validates a file list: clean relative POSIX paths, unique,
// 64 lower-case hex SHA-256, non-negative sizes.
func checkFiles(files []FileDigest) error {
	seen := map[string]bool{}
	for _, f := range files {
		if !cleanRel(f.Path) {
			return fmt.Errorf("file path %q is not a clean relative POSIX path", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q listed twice", f.Path)
		}
		seen[f.Path] = true
		if !isSHA256(f.SHA256) {
			return fmt.Errorf("file %q: sha256 %q is not 64 lower-case hex digits", f.Path, f.SHA256)
		}
		if f.SizeBytes < 0 {
			return fmt.Errorf("file %q: negative size", f.Path)
		}
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// utf16Less orders strings by UTF-16 code units, as RFC 8785 orders keys;
// for ASCII it is byte order.
func utf16Less(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func sortedFiles(files []FileDigest) []FileDigest {
	out := slices.Clone(files)
	slices.SortFunc(out, func(a, b FileDigest) int { return utf16Less(a.Path, b.Path) })
	return out
}

// ContentDigest is the digest of the RFC 8785 form of the [path, sha256]
// pairs sorted by path (reference/evidence.md §2.5.3).
func ContentDigest(files []FileDigest) (string, error) {
	if err := checkFiles(files); err != nil {
		return "", err
	}
	pairs := make([][2]string, 0, len(files))
	for _, f := range sortedFiles(files) {
		pairs = append(pairs, [2]string{f.Path, f.SHA256})
	}
	_, d, err := canon.MarshalDigest(pairs)
	return d, err
}

// ManifestDigest is the digest of the sorted [path, sha256, size] list: the
// manifest a source observation found.
func ManifestDigest(files []FileDigest) (string, error) {
	if err := checkFiles(files); err != nil {
		return "", err
	}
	rows := make([][]any, 0, len(files))
	for _, f := range sortedFiles(files) {
		rows = append(rows, []any{f.Path, f.SHA256, f.SizeBytes})
	}
	_, d, err := canon.MarshalDigest(rows)
	return d, err
}

// ComponentStructureDigest is the digest of the sorted [role,
// content_digest] list of a multi-component artifact.
func ComponentStructureDigest(cs []Component) (string, error) {
	rows := make([][2]string, 0, len(cs))
	for _, c := range cs {
		if c.Role == "" || !canon.IsDigest(c.ContentDigest) {
			return "", fmt.Errorf("component %q: needs a role and a content digest", c.Role)
		}
		rows = append(rows, [2]string{c.Role, c.ContentDigest})
	}
	slices.SortFunc(rows, func(a, b [2]string) int {
		if c := utf16Less(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	_, d, err := canon.MarshalDigest(rows)
	return d, err
}

// IdentityV1 is the narwhal.v1 identity of a resolved file list: files
// outside the rule are dropped first, so a README edit changes nothing.
func IdentityV1(files []FileDigest) (Identity, error) {
	var kept []FileDigest
	for _, f := range files {
		if IncludedV1(f.Path) {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		return Identity{}, errors.New("artifact identity: no files under rule " + FileRuleV1)
	}
	d, err := ContentDigest(kept)
	if err != nil {
		return Identity{}, fmt.Errorf("artifact identity: %w", err)
	}
	return Identity{SchemaVersion: IdentitySchemaVersion, FileRule: FileRuleV1, ContentDigest: d}, nil
}

// ErrUnresolved is returned when a locator is used without a resolution
// to an immutable revision and per-file digests (INV-33).
var ErrUnresolved = errors.New("artifact locator is not resolved to an immutable revision with per-file digests")

// Resolve checks that obs resolves l (same source kind, an immutable
// revision, every file digested) and returns the identity under
// FileRuleV1. A location alone never yields an identity.
func (l Locator) Resolve(obs *SourceObservation) (Identity, error) {
	if err := l.Validate(); err != nil {
		return Identity{}, err
	}
	if obs == nil {
		return Identity{}, fmt.Errorf("%w: %s %s has no source observation", ErrUnresolved, l.SourceKind, l.URI)
	}
	if obs.SourceKind != l.SourceKind {
		return Identity{}, fmt.Errorf("%w: observation is of a %s source, locator names %s", ErrUnresolved, obs.SourceKind, l.SourceKind)
	}
	if len(obs.Files) == 0 {
		return Identity{}, fmt.Errorf("%w: observation lists no file digests", ErrUnresolved)
	}
	id, err := IdentityV1(obs.Files)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrUnresolved, err)
	}
	if !immutableRevision(l.SourceKind, obs.ResolvedRevision, id) {
		return Identity{}, fmt.Errorf("%w: resolved revision %q is not immutable for a %s source", ErrUnresolved, obs.ResolvedRevision, l.SourceKind)
	}
	return id, nil
}

// immutableRevision: a Hugging Face commit id (40 hex), an OCI manifest
// digest (sha256:…), or for sources without revisions the content digest
// itself ("content:" + ContentDigest).
func immutableRevision(kind, rev string, id Identity) bool {
	switch {
	case rev == "content:"+id.ContentDigest:
		return true
	case kind == SourceHuggingFace:
		return len(rev) == 40 && isLowerHex(rev)
	case kind == SourceOCI:
		return strings.HasPrefix(rev, "sha256:") && isSHA256(rev[len("sha256:"):])
	}
	return false
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks the locator's own fields.
func (l Locator) Validate() error {
	if !slices.Contains(sourceKinds, l.SourceKind) {
		return fmt.Errorf("locator source_kind %q: want one of %s", l.SourceKind, strings.Join(sourceKinds, ", "))
	}
	if l.URI == "" {
		return errors.New("locator uri is empty")
	}
	if l.SourceKind == SourceLocal && !path.IsAbs(l.URI) {
		return fmt.Errorf("local locator uri %q must be an absolute path", l.URI)
	}
	return nil
}
