package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/canon"
)

// Generation is the digest a profile row binds to (operations.md §5.9):
// with a verified attestation its attestation_digest in sha256:<hex>
// form; without a contract the sha256 of the canonical
// {"engine":{"vllm_version","process_start_time_seconds"}}. The profiler
// writes it, and preflight and the router compare rows with it, so all
// three agree on what "the same engine process" means.
func Generation(version string, processStart float64, attestationDigest string) (string, error) {
	if attestationDigest != "" {
		hexPart := strings.TrimPrefix(strings.TrimPrefix(attestationDigest, canon.DigestPrefix), "sha256:")
		if !digestRe.MatchString("sha256:" + hexPart) {
			return "", fmt.Errorf("attestation_digest %q is not a sha256 digest", attestationDigest)
		}
		return "sha256:" + hexPart, nil
	}
	type engine struct {
		Version      string  `json:"vllm_version"`
		ProcessStart float64 `json:"process_start_time_seconds"`
	}
	b, err := canon.Marshal(struct {
		Engine engine `json:"engine"`
	}{engine{version, processStart}})
	if err != nil {
		return "", fmt.Errorf("engine generation: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// CheckGeneration compares a row's generation_digest with the live
// engine's generation; the error names the engine and how to fix it.
func CheckGeneration(r Row, live string) error {
	switch {
	case r.GenerationDigest == nil:
		return fmt.Errorf("%s profile has no generation_digest; re-profile it with narwhal-profile --engines %s --merge (a running router re-reads profiles.path)", r.IID, r.IID)
	case *r.GenerationDigest != live:
		return fmt.Errorf("%s profile was measured on generation %s but the live engine is %s (it restarted or was relaunched); re-profile it with narwhal-profile --engines %s --merge (a running router re-reads profiles.path)",
			r.IID, *r.GenerationDigest, live, r.IID)
	}
	return nil
}
