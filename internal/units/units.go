// Package units converts the float seconds of documents and flags into
// Go durations, once, so every caller rounds the same way.
package units

import (
	"math"
	"strconv"
	"time"
)

// Seconds is s seconds as a Duration, rounded to the nearest nanosecond.
//
// Rounding, not truncation: 1.001 × 1e9 is 1000999999.9999999 in float64,
// and truncating it gives 1.000999999 s, a timeout one nanosecond short of what the fleet file says and a
// simulated step that drifts from the profile curve. math.Round is
// symmetric, so a negative remainder (a deadline already passed) rounds
// the same way a positive one does.
func Seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// GiB prints a byte count in GiB with two decimals ("14.99 GiB"), the
// form vLLM's own memory lines use.
func GiB(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64) + " GiB" }
