package metrics

import "testing"

func TestSetDriftMovesCountersByTheirGrowth(t *testing.T) {
	m := New(testConfig())
	m.SetDrift("e2", true, false, 3, 1, 0)
	m.SetDrift("e2", true, true, 5, 1, 2)
	wantSamples(t, scrape(t, m), []sample{
		{"narwhal_probation_instances", "iid=e2", 1},
		{"narwhal_probation_instances", "iid=e3", 0},
		{"narwhal_health_prefill_paused", "iid=e2", 1},
		{"narwhal_health_windows_scored_total", "iid=e2", 5},
		{"narwhal_health_windows_undersampled_total", "iid=e2", 1},
		{"narwhal_health_prefill_pauses_total", "iid=e2", 2},
		{"narwhal_health_windows_scored_total", "iid=e1", 0},
	})
}
