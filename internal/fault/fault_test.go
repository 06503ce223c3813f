package fault

import (
	"fmt"
	"testing"
)

func TestAsFindsTheErrorThroughWrapping(t *testing.T) {
	e := &Error{Phase: Decode, Reason: EngineTimeout, Msg: "no first token"}
	cases := []struct {
		name string
		err  error
		want *Error
	}{
		{"itself", e, e},
		{"wrapped", fmt.Errorf("leg on e1: %w", e), e},
		{"foreign", fmt.Errorf("boom"), nil},
		{"nil", nil, nil},
	}
	for _, tc := range cases {
		if got := As(tc.err); got != tc.want {
			t.Errorf("%s: As = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOfNamesAForeignErrorInternal(t *testing.T) {
	got := Of(fmt.Errorf("bug"), Prefill)
	if got.Reason != Internal || got.Phase != Prefill || got.Msg != "bug" {
		t.Fatalf("Of(foreign) = %+v, want an internal prefill failure saying bug", got)
	}
	e := &Error{Phase: Decode, Reason: EngineConnection}
	if Of(e, Prefill) != e {
		t.Fatal("Of replaced an *Error of the vocabulary")
	}
}

func TestClassification(t *testing.T) {
	cases := []struct {
		e                         Error
		transient, client, cutAt1 bool
	}{
		{Error{Reason: EngineTimeout}, true, false, true},
		{Error{Reason: EngineRejected, Status: 400}, false, true, false},
		{Error{Reason: EngineRejected, Status: 404}, false, false, false},
		{Error{Reason: LocalPool}, false, false, false},
		{Error{Reason: ResponseLimit}, false, false, false},
		{Error{Reason: InvalidResponse, Class: ClassStream}, true, false, true},
		{Error{Reason: InvalidResponse, Class: ClassKVHandoff}, true, false, true},
		{Error{Reason: InvalidResponse, Class: ClassInferenceStatus}, false, false, true},
	}
	for _, tc := range cases {
		e := tc.e
		if e.Transient() != tc.transient || e.ClientFault() != tc.client || e.CutAfter(1) != tc.cutAt1 || e.CutAfter(0) {
			t.Errorf("%+v: transient %v client %v cut %v; want %v %v %v", e, e.Transient(), e.ClientFault(), e.CutAfter(1),
				tc.transient, tc.client, tc.cutAt1)
		}
	}
}

// The reasons' spelling is the journal's wire format (runtime.md §4):
// a rename of a constant must not change what rows say.
func TestReasonSpelling(t *testing.T) {
	want := []string{"no_engine", "engine_unreachable", "engine_connection", "engine_timeout", "engine_overloaded",
		"engine_rejected", "engine_error", "local_pool", "invalid_response", "response_limit", "internal", "output_cut", "router_lost"}
	got := Strings(FailedReasons())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("failed reasons %v, want %v", got, want)
	}
}
