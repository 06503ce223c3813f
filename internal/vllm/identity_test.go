package vllm

import (
	"strings"
	"testing"
)

func TestParseProcessStart(t *testing.T) {
	tests := []struct {
		name, in string
		want     float64
		err      string
	}{
		{"gauge", "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7583012345e+09\n", 1758301234.5, ""},
		{"untyped", "process_start_time_seconds 12.5\n", 12.5, ""},
		{"absent", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n", 0, "no process_start_time_seconds"},
		{"zero", "process_start_time_seconds 0\n", 0, "finite positive"},
		{"nan", "process_start_time_seconds NaN\n", 0, "finite positive"},
		{"garbage", "process_start_time_seconds one\n", 0, "not a Prometheus text exposition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcessStart(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestEventText(t *testing.T) {
	tests := []struct {
		data string
		want string
	}{
		{`{"choices":[{"text":" the","token_ids":[5]}]}`, " the"},
		{`{"choices":[{"delta":{"content":" sky"},"token_ids":[7]}]}`, " sky"},
		{`[DONE]`, ""},
	}
	for _, tc := range tests {
		ev, e := parseEvent([]byte(tc.data))
		if e != nil {
			t.Fatal(e)
		}
		if got := EventText(ev); got != tc.want {
			t.Fatalf("EventText(%s) = %q, want %q", tc.data, got, tc.want)
		}
	}
}

// TestSameProcess: the one "same build" and "same process" rule.
func TestSameProcess(t *testing.T) {
	base := Identity{Version: "0.11.0", ProcessStart: 1000.5}
	for _, tc := range []struct {
		name string
		o    Identity
		want bool
	}{
		{"identical", base, true},
		{"start re-read within tolerance", Identity{Version: "0.11.0", ProcessStart: 1000.5 + StartTolerance/2}, true},
		{"restarted", Identity{Version: "0.11.0", ProcessStart: 1001}, false},
		{"other build", Identity{Version: "0.12.0", ProcessStart: 1000.5}, false},
		{"local label is another build", Identity{Version: "0.11.0+cu128", ProcessStart: 1000.5}, false},
	} {
		if got := base.SameProcess(tc.o); got != tc.want {
			t.Errorf("%s: SameProcess = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !SameBuild("0.11.0", "0.11.0") || SameBuild("0.11.0", "0.11.1") || SameBuild("", "0.11.0") {
		t.Error("SameBuild: want exact version equality")
	}
}
