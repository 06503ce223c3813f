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
