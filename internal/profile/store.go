package profile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/atomicfile"
)

type kind int

const (
	kString kind = iota
	kNonNeg      // finite float ≥ 0
	kPosInt      // positive integer
	kNumber      // finite float
)

// fields lists every row field and how it is checked. A field that is not
// here is rejected: a misspelt optional field would otherwise be silently
// dropped and its default used.
var fields = map[string]kind{
	"iid": kString, "generation_digest": kString,
	"ttft_a": kNonNeg, "ttft_b": kNonNeg, "ttft_c": kNonNeg,
	"ttft_block_tokens": kPosInt, "ttft_split": kNumber,
	"cached_ttft_a": kNumber, "cached_ttft_b": kNumber, "cached_ttft_c": kNumber, "cached_ttft_d": kNumber,
	"cached_cv_mape": kNonNeg, "cached_min_prefix_tokens": kPosInt, "cached_max_prefix_tokens": kPosInt,
	"cached_min_suffix_tokens": kPosInt, "cached_max_suffix_tokens": kPosInt,
	"tpot_slope": kNonNeg, "tpot_intercept": kNonNeg, "tpot_request_slope": kNonNeg,
	"decode_min_requests": kPosInt, "decode_max_requests": kPosInt,
	"decode_min_kv_tokens": kPosInt, "decode_max_kv_tokens": kPosInt, "kv_capacity_tokens": kPosInt,
	"decode_fit_mape": kNonNeg, "decode_cv_mape": kNonNeg,
	"prefill_min_tokens": kPosInt, "prefill_max_tokens": kPosInt,
	"decode_min_output_tokens": kPosInt, "decode_max_output_tokens": kPosInt,
	"colocated_group": kString, "colocated_target_role": kString,
	"colocated_prefill_engines": kPosInt, "colocated_decode_engines": kPosInt,
	"colocated_prefill_rps": kNonNeg, "colocated_decode_rps": kNonNeg,
}

var required = []string{
	"iid", "ttft_a", "ttft_b", "ttft_c", "tpot_slope", "tpot_intercept",
	"decode_min_requests", "decode_max_requests", "decode_min_kv_tokens", "decode_max_kv_tokens",
	"decode_fit_mape", "decode_cv_mape",
}

var digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Load reads and validates a store. Every error names the file, the
// profile (iid, or index when the iid is unusable) and the field.
func Load(path string) (*Store, error) {
	s, _, err := LoadDigest(path)
	return s, err
}

// LoadDigest is Load that also returns the file's FileDigest.
func LoadDigest(path string) (*Store, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("profile store %s: %w (check profiles.path)", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return s, FileDigest(b), nil
}

// FileDigest is the sha256 of a store file's bytes, "sha256:<hex>": the
// router reports the digest it loaded (/narwhal/state.profiles), so
// narwhal-profile can tell whether a running router took the rows it
// wrote.
func FileDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Parse decodes and validates a store document.
func Parse(b []byte) (*Store, error) {
	var doc struct {
		Schema        *string           `json:"schema"`
		SchemaVersion json.RawMessage   `json:"schema_version"`
		Profiles      []json.RawMessage `json:"profiles"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not a narwhal.profiles document: %v", err)
	}
	if doc.Schema == nil || *doc.Schema != Schema {
		return nil, fmt.Errorf("schema must be %q", Schema)
	}
	v, err := parseInt(doc.SchemaVersion)
	if err != nil {
		return nil, fmt.Errorf("schema_version must be an integer: %v", err)
	}
	if v != SchemaVersion {
		return nil, fmt.Errorf("schema_version %d is not supported (this build reads %d; upgrade narwhal or re-profile)", v, SchemaVersion)
	}
	if doc.Profiles == nil {
		return nil, errors.New("profiles must be an array")
	}
	s := &Store{Schema: Schema, SchemaVersion: SchemaVersion}
	seen := map[string]bool{}
	for i, raw := range doc.Profiles {
		r, err := parseRow(raw, i)
		if err != nil {
			return nil, err
		}
		key := r.IID + "\x00" + deref(r.ColocatedGroup)
		if seen[key] {
			return nil, fmt.Errorf("profile %s: iid: duplicate row (keep one row per engine)", r.IID)
		}
		seen[key] = true
		s.Profiles = append(s.Profiles, r)
	}
	return s, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func parseRow(raw json.RawMessage, idx int) (Row, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Row{}, fmt.Errorf("profile %d: must be an object", idx)
	}
	who := strconv.Itoa(idx)
	if v, ok := m["iid"]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil && s != "" {
			who = s
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := checkField(k, m[k]); err != nil {
			return Row{}, fmt.Errorf("profile %s: %s %v", who, k, err)
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			return Row{}, fmt.Errorf("profile %s: %s is required (re-run narwhal-profile)", who, k)
		}
	}
	var r Row
	if err := json.Unmarshal(raw, &r); err != nil {
		return Row{}, fmt.Errorf("profile %s: %v", who, err)
	}
	if err := r.Validate(); err != nil {
		return Row{}, fmt.Errorf("profile %s: %w", who, err)
	}
	return r, nil
}

func checkField(k string, v json.RawMessage) error {
	kd, ok := fields[k]
	if !ok {
		return errors.New("is not a profile field (remove it or fix its spelling)")
	}
	if k == "generation_digest" && string(v) == "null" {
		return nil // allowed in the file; preflight rejects it
	}
	switch kd {
	case kString:
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s == "" {
			return errors.New("must be a non-empty string")
		}
		if k == "generation_digest" && !digestRe.MatchString(s) {
			return errors.New("must be sha256:<64 lowercase hex>")
		}
	case kPosInt:
		n, err := parseInt(v)
		if err != nil {
			return fmt.Errorf("must be a positive integer: %v", err)
		}
		if n <= 0 {
			return errors.New("must be a positive integer")
		}
	case kNonNeg, kNumber:
		f, err := parseFloat(v)
		if err != nil {
			return fmt.Errorf("must be a finite number: %v", err)
		}
		if kd == kNonNeg && f < 0 {
			return errors.New("must be ≥ 0")
		}
	}
	return nil
}

// parseInt accepts only a JSON number with an integral value: true, "96"
// and 1.5 are all rejected.
func parseInt(v json.RawMessage) (int64, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, fmt.Errorf("got %s", t)
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("got %s", t)
	}
	return int64(f), nil
}

func parseFloat(v json.RawMessage) (float64, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, fmt.Errorf("got %s", t)
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("got %s", t)
	}
	return f, nil
}

// Validate checks the cross-field rules of one row; the message names the
// field.
func (r Row) Validate() error {
	if r.IID == "" {
		return errors.New("iid must be a non-empty string")
	}
	for _, c := range []struct {
		name     string
		lo, hi   *int
		loN, hiN string
	}{
		{"decode requests", r.DecodeMinRequests, r.DecodeMaxRequests, "decode_min_requests", "decode_max_requests"},
		{"decode kv tokens", r.DecodeMinKVTokens, r.DecodeMaxKVTokens, "decode_min_kv_tokens", "decode_max_kv_tokens"},
		{"prefill tokens", r.PrefillMinTokens, r.PrefillMaxTokens, "prefill_min_tokens", "prefill_max_tokens"},
		{"output tokens", r.DecodeMinOutputTokens, r.DecodeMaxOutputTokens, "decode_min_output_tokens", "decode_max_output_tokens"},
		{"cached prefix", r.CachedMinPrefixTokens, r.CachedMaxPrefixTokens, "cached_min_prefix_tokens", "cached_max_prefix_tokens"},
		{"cached suffix", r.CachedMinSuffixTokens, r.CachedMaxSuffixTokens, "cached_min_suffix_tokens", "cached_max_suffix_tokens"},
	} {
		if c.lo != nil && c.hi != nil && *c.lo > *c.hi {
			return fmt.Errorf("%s must be ≤ %s (%d > %d)", c.loN, c.hiN, *c.lo, *c.hi)
		}
	}
	if r.TPOTSlope == 0 && (r.DecodeMaxRequests == nil || r.DecodeMaxKVTokens == nil) {
		return errors.New("tpot_slope must be > 0 unless decode_max_requests and decode_max_kv_tokens are set")
	}
	if r.KVCapacityTokens != nil && r.DecodeMaxKVTokens != nil && *r.KVCapacityTokens < *r.DecodeMaxKVTokens {
		return fmt.Errorf("kv_capacity_tokens must be ≥ decode_max_kv_tokens (%d < %d)", *r.KVCapacityTokens, *r.DecodeMaxKVTokens)
	}
	if (r.TTFTBlockTokens == nil) != (r.TTFTSplit == nil) {
		return errors.New("ttft_block_tokens and ttft_split must be set together or not at all")
	}
	cached := []bool{r.CachedTTFTA != nil, r.CachedTTFTB != nil, r.CachedTTFTC != nil, r.CachedTTFTD != nil,
		r.CachedCVMAPE != nil, r.CachedMinPrefixTokens != nil, r.CachedMaxPrefixTokens != nil,
		r.CachedMinSuffixTokens != nil, r.CachedMaxSuffixTokens != nil}
	n := 0
	for _, c := range cached {
		if c {
			n++
		}
	}
	if n != 0 && n != len(cached) {
		return errors.New("cached_ttft_a: the nine cached_* fields must be set together or not at all")
	}
	return r.validateColocated()
}

func (r Row) validateColocated() error {
	set := r.ColocatedTargetRole != nil || r.ColocatedPrefillEngines != nil || r.ColocatedDecodeEngines != nil ||
		r.ColocatedPrefillRPS != nil || r.ColocatedDecodeRPS != nil
	if r.ColocatedGroup == nil {
		if set {
			return errors.New("colocated_group: colocated_* fields need colocated_group")
		}
		return nil
	}
	if r.ColocatedTargetRole == nil || r.ColocatedPrefillEngines == nil || r.ColocatedDecodeEngines == nil ||
		r.ColocatedPrefillRPS == nil || r.ColocatedDecodeRPS == nil {
		return errors.New("colocated_group: every colocated_* field must be set with it")
	}
	if role := *r.ColocatedTargetRole; role != "prefill" && role != "decode" {
		return fmt.Errorf("colocated_target_role must be prefill or decode, got %q", role)
	}
	if *r.ColocatedPrefillEngines+*r.ColocatedDecodeEngines < 2 {
		return errors.New("colocated_prefill_engines + colocated_decode_engines must be ≥ 2")
	}
	return nil
}

// Cover checks that the store has exactly the engines iids: a missing or an
// extra row fails startup.
func (s *Store) Cover(iids []string) error {
	want := map[string]bool{}
	for _, id := range iids {
		want[id] = true
		if _, ok := s.Get(id); !ok {
			return fmt.Errorf("profile %s: missing (profile the engine with narwhal-profile)", id)
		}
	}
	for _, r := range s.Profiles {
		if !want[r.IID] {
			return fmt.Errorf("profile %s: not an engine of the fleet (remove the row or add the engine)", r.IID)
		}
	}
	return nil
}

// Save writes the store atomically: temp file, fsync, rename, fsync dir.
func Save(path string, s *Store) error {
	out := Store{Schema: Schema, SchemaVersion: SchemaVersion, Profiles: s.Profiles}
	if out.Profiles == nil {
		out.Profiles = []Row{}
	}
	for _, r := range out.Profiles {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("save %s: profile %s: %w", path, r.IID, err)
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("save profiles: %w", err)
	}
	return nil
}

// Generations maps iid → the row's generation_digest, for the rows that
// carry one: the process generation each row's curves were measured on
// (operations.md §5.9).
func (s *Store) Generations() map[string]string {
	out := map[string]string{}
	for _, row := range s.Profiles {
		if row.GenerationDigest != nil {
			out[row.IID] = *row.GenerationDigest
		}
	}
	return out
}
