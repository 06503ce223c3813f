package diagnose

import "github.com/narwhal-go/narwhal/internal/canon"

// Fingerprint is the failure fingerprint of ADR-006 §9: exception class,
// engine call-site module and family, each normalized so that the same
// failure gives the same tuple across runs (other numbers, paths, pids)
// and across vLLM's V0 and V1 wordings. A failure without an exception
// (a killed process) has a nil class; one whose call site is unknown has a
// nil module.
type Fingerprint struct {
	ExceptionClass *ExceptionClass `json:"exception_class"`
	CallSiteModule *Module         `json:"callsite_module"`
	Family         Family          `json:"error_family"`
}

// Digest is the multihash SHA-256 of the fingerprint's canonical JSON
// (reference/evidence.md §2.11.3 step 7).
func (f Fingerprint) Digest() (string, error) {
	_, d, err := canon.MarshalDigest(f)
	return d, err
}
