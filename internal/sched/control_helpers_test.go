package sched

import (
	"reflect"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

func TestRefusedSince(t *testing.T) {
	at := func(ts ...float64) ControlState {
		var s ControlState
		for _, x := range ts {
			s.FlipsRefused = append(s.FlipsRefused, Refused{At: x})
		}
		return s
	}
	for _, tc := range []struct {
		name          string
		before, after ControlState
		want          int
	}{
		{"none before, none after", at(), at(), 0},
		{"none before", at(), at(1, 2), 2},
		{"nothing new", at(1, 2), at(1, 2), 0},
		{"two new", at(1, 2), at(1, 2, 3, 4), 2},
		{"history rolled over", at(1, 2, 3), at(3, 4, 5), 2},
	} {
		if got := tc.after.RefusedSince(tc.before); got != tc.want {
			t.Errorf("%s: RefusedSince = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestDecisionJournalDetails(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decision
		want map[string]any
	}{
		{"no details, no flip", Decision{}, map[string]any{}},
		{"details only", Decision{Details: map[string]float64{"load": 0.5}}, map[string]any{"load": 0.5}},
		{"a flip adds its engine and role", Decision{Details: map[string]float64{"load": 0.5}, Flip: &Flip{IID: "p0", To: fleet.Decode}},
			map[string]any{"load": 0.5, "iid": "p0", "to": fleet.Decode}},
	} {
		if got := tc.d.JournalDetails(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	d := Decision{Details: map[string]float64{"k": 1}}
	d.JournalDetails()["k"] = 2.0
	if d.Details["k"] != 1 {
		t.Error("JournalDetails shares the decision's map")
	}
}
