package diagnose

// Field names a Facts field, for rejections.
type Field string

// RejectReason says why a logged value was not kept.
type RejectReason string

// Reject reasons.
const (
	RejectMalformed       RejectReason = "malformed"             // not a number / not parseable
	RejectOutOfRange      RejectReason = "out_of_range"          // outside the field's schema range
	RejectExceedsDevice   RejectReason = "exceeds_device_memory" // larger than the GPU's total memory
	RejectInconsistent    RejectReason = "inconsistent"          // contradicts another fact (free > total, needed ≤ available…)
	RejectNotInEnum       RejectReason = "not_in_enum"           // outside the closed set
	RejectBadIdentifier   RejectReason = "invalid_identifier"    // not a valid identifier (or too long)
	RejectUnknownGPU      RejectReason = "gpu_not_in_table"      // a GPU name memory's table does not know
	RejectConflict        RejectReason = "conflicting_values"    // two lines state different values; both dropped
	RejectAboveModelLimit RejectReason = "above_model_limit"     // a max_model_len above the model config's limit
)

// Rejection is one logged value a diagnosis refused, and why.
type Rejection struct {
	Field  Field        `json:"field"`
	Reason RejectReason `json:"reason"`
	Line   int          `json:"line"` // 1-based line of the log
}
