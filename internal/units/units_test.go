package units

import (
	"testing"
	"time"
)

func TestSecondsRoundsToTheNearestNanosecond(t *testing.T) {
	tests := []struct {
		s    float64
		want time.Duration
	}{
		{0, 0},
		{1, time.Second},
		{0.3, 300 * time.Millisecond},     // 0.3 * 1e9 is 299999999.99999994
		{0.05, 50 * time.Millisecond},     // the loop-lag probe interval
		{2.0 / 4, 500 * time.Millisecond}, // slo.ttft_s / 4
		{1e-9, time.Nanosecond},
		{4e-10, 0},
		{6e-10, time.Nanosecond},
		{-0.3, -300 * time.Millisecond}, // a deadline already passed
		{-6e-10, -time.Nanosecond},
		{86400.000000001, 24*time.Hour + time.Nanosecond},
	}
	for _, tc := range tests {
		if got := Seconds(tc.s); got != tc.want {
			t.Errorf("Seconds(%v) = %v (%d ns), want %v", tc.s, got, int64(got), tc.want)
		}
	}
}

func TestGiB(t *testing.T) {
	for b, want := range map[int64]string{0: "0.00 GiB", 1 << 30: "1.00 GiB", 16095114526: "14.99 GiB", -(3 << 29): "-1.50 GiB"} {
		if got := GiB(b); got != want {
			t.Errorf("GiB(%d) = %q, want %q", b, got, want)
		}
	}
}
