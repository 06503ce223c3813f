package diagnose

import (
	"errors"
	"io"
)

// Status says whether a matcher recognised the failure.
type Status string

// Statuses.
const (
	StatusRecognized   Status = "recognized"
	StatusUnrecognized Status = "unrecognized"
	// StatusNoFailure: the log shows no failure at all (no exception, no
	// error line any matcher or the fallback would record).
	StatusNoFailure Status = "no_failure"
)

// Wording identifies which message form a matcher recognised (for
// example the V0 or the V1 text of one family). Closed set, one per
// matcher pattern.
type Wording string

// Diagnosis is what one log says about one failure.
type Diagnosis struct {
	Status      Status      `json:"status"`
	Family      Family      `json:"family"`
	Wording     Wording     `json:"wording"` // "" when unrecognized
	Fingerprint Fingerprint `json:"fingerprint"`
	// FingerprintDigest is Fingerprint.Digest().
	FingerprintDigest string      `json:"fingerprint_digest"`
	Facts             Facts       `json:"facts"`
	Rejected          []Rejection `json:"rejected"`
	// Evidence are the 1-based line numbers of the lines the diagnosis
	// used, ascending. The lines themselves are not kept.
	Evidence []int `json:"evidence_lines"`
	// Lines read, and how many of them were longer than the line limit
	// (their tail was not read).
	Lines          int `json:"lines"`
	TruncatedLines int `json:"truncated_lines"`
}

// Options are the hardware and model facts a diagnosis validates the log
// against. All optional.
type Options struct {
	// GPU is a name memory.LookupGPU knows ("A100-80GB", "NVIDIA L4");
	// its total memory and compute capability bound the log's figures. An
	// unknown name is an error.
	GPU string
	// GPUTotalBytes overrides the table's total memory (the figure the
	// driver reports).
	GPUTotalBytes *int64
	// ModelMaxLen is the model config's own context limit, when known: a
	// logged max_model_len above it is rejected.
	ModelMaxLen *int64
	// MaxLineBytes bounds how much of one line is read (default 64 KiB);
	// the rest of a longer line is skipped.
	MaxLineBytes int
}

// ErrNotImplemented is returned by the stub until the scanner lands.
var ErrNotImplemented = errors.New("diagnose: not implemented yet")

// Diagnose reads a log and names its failure. It is deterministic. It
// fails only when the reader fails or the options are invalid; a log
// without a recognisable failure is a Diagnosis with StatusUnrecognized
// or StatusNoFailure.
func Diagnose(r io.Reader, opt Options) (Diagnosis, error) {
	return Diagnosis{}, ErrNotImplemented
}
