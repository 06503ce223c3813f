package journal

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/narwhal-go/narwhal/internal/fault"
)

// rowKeys is every key of a request row in write order: the envelope, then
// runtime.md §4.1. A rename or a dropped field breaks this test.
var rowKeys = []string{
	"schema", "schema_version", "run",
	"rid", "client_rid", "client_rid_bytes", "arrived", "input_len", "input_sized", "wanted_len", "output_len",
	"ttft_s", "tpot_s", "first_byte_s", "decode_tpot_s", "queue_wait_s", "queue_waits",
	"admission_price", "duration_s", "attempts", "decode_attempts", "attempt_failures",
	"decode_tokens_observed", "upstream_seconds", "prefill_iid", "decode_iid", "crossed",
	"cached_tokens", "cache_placement", "token_accounting", "error", "status", "error_type",
	"error_code", "reason", "terminal", "cancelled", "cancelled_phase", "refused", "rejected",
	"expired", "refused_cause", "readiness_reason", "trace_id",
}

func writeOne(t *testing.T, row *RequestRow) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Request(row); err != nil {
		t.Fatal(err)
	}
	return strings.Split(buf.String(), "\n")[1]
}

func keysInOrder(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestRowKeysAlwaysWritten(t *testing.T) {
	line := writeOne(t, completed("r1"))
	if diff := cmp.Diff(rowKeys, keysInOrder(t, line)); diff != "" {
		t.Fatalf("row keys (-want +got):\n%s", diff)
	}
}

func TestNilFieldsRenderNull(t *testing.T) {
	line := writeOne(t, completed("r1"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	nulls := []string{"client_rid", "client_rid_bytes", "wanted_len", "output_len", "ttft_s", "tpot_s", "first_byte_s",
		"decode_tpot_s", "admission_price", "prefill_iid", "decode_iid", "crossed", "cached_tokens",
		"cache_placement", "error", "status", "error_type", "error_code", "reason", "cancelled_phase",
		"refused_cause", "readiness_reason", "trace_id"}
	for _, k := range nulls {
		if string(m[k]) != "null" {
			t.Errorf("%s = %s, want null", k, m[k])
		}
	}
	fixed := map[string]string{"attempt_failures": "[]", "token_accounting": `"token_ids"`,
		"queue_waits": `{"admission":0,"prefill":0,"decode":0}`, "upstream_seconds": `{"prefill":0,"decode":0}`,
		"cancelled": "false", "refused": "false", "rejected": "false", "expired": "false"}
	for k, v := range fixed {
		if string(m[k]) != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
}

// fullRow sets every field, so the round trip covers each one.
func fullRow() *RequestRow {
	return &RequestRow{
		RID: "r-full", ClientRID: Ptr("client-7"), Arrived: 12.25,
		InputLen: 512, InputSized: true, WantedLen: Ptr(64), OutputLen: Ptr(3),
		TTFT: Ptr(0.4), TPOT: Ptr(0.02), FirstByte: Ptr(0.45), DecodeTPOT: Ptr(0.019),
		QueueWait: 0.1, QueueWaits: QueueWaits{Admission: 0.05, Prefill: 0.03, Decode: 0.02},
		Price:     &Price{PriceS: 0.5, ElapsedS: 0.1, BacklogS: 0.2, OwnPrefillS: 0.2},
		DurationS: 1.5, Attempts: 2, DecodeTries: 2,
		AttemptFailures: []AttemptFailure{{At: 12.5, Attempt: 1, Phase: fault.Decode, Reason: fault.EngineTimeout,
			PrefillIID: Ptr("e1"), DecodeIID: Ptr("e2"), ErrorType: Ptr("timeout"), ErrorMessage: "read timeout",
			Status: Ptr(504), Transient: true, RetryScheduled: true, BackoffS: Ptr(0.07), RetryReason: RetryAllowed}},
		DecodeTokensObserved: 4, UpstreamSeconds: UpstreamSeconds{Prefill: 0.6, Decode: 0.9},
		PrefillIID: Ptr("e1"), DecodeIID: Ptr("e3"), Crossed: Ptr(true),
		CachedTokens: map[string]int{"e1": 256, "e3": 0},
		CachePlacement: &CachePlacement{PlacedIID: "e1", PlacedCachedTokens: 256, EvidenceSequence: 9,
			PredictedPrefillS: 0.1, ColdPrefillS: 0.3, ColdChoiceIID: "e3"},
		TokenAccounting: TokenIDs, Status: Ptr(200), Terminal: TerminalCompleted,
		TraceID: Ptr("4bf92f3577b34da6a3ce929d0e0e4736"),
	}
}

func TestRequestRoundTrip(t *testing.T) {
	rows := []*RequestRow{
		fullRow(),
		completed("r-min"),
		{RID: "r-ref", Terminal: TerminalRefused, Reason: Ptr(CauseTPOT), Status: Ptr(429),
			Error: Ptr("decode pool would miss the TPOT target"), ErrorType: Ptr("server_overloaded_error")},
		{RID: "r-can", Terminal: TerminalCancelled, CancelledPhase: Ptr(string(fault.Decode)), OutputLen: Ptr(7)},
		{RID: "r-rej", Terminal: TerminalRejected, Reason: Ptr(string(fault.NotReady)), Status: Ptr(503),
			ReadinessReason: Ptr("standby")},
		{RID: "r-exp", Terminal: TerminalExpired, Reason: Ptr(string(fault.Handoff)), Status: Ptr(504)},
		{RID: "r-inv", Terminal: TerminalInvalid, Status: Ptr(400), Error: Ptr("bad json")},
		{RID: "r-fail", Terminal: TerminalFailed, Reason: Ptr(string(fault.NoEngine)), Status: Ptr(503)},
	}
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Request(r); err != nil {
			t.Fatalf("%s: %v", r.RID, err)
		}
	}
	j, err := ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Requests) != len(rows) {
		t.Fatalf("read %d rows, wrote %d", len(j.Requests), len(rows))
	}
	for i, r := range rows {
		want := r.normalized(TokenIDs)
		if diff := cmp.Diff(want, j.Requests[i].Request); diff != "" {
			t.Errorf("%s (-wrote +read):\n%s", r.RID, diff)
		}
		if j.Requests[i].Line != i+2 || j.Requests[i].Run != w.Run() {
			t.Errorf("%s: line %d run %s", r.RID, j.Requests[i].Line, j.Requests[i].Run)
		}
	}
	ref := j.Requests[2].Request
	if !ref.Refused || ref.RefusedCause == nil || *ref.RefusedCause != CauseDecode {
		t.Errorf("refused tpot row: refused=%v cause=%v, want true and %q", ref.Refused, ref.RefusedCause, CauseDecode)
	}
	if rows[2].Refused || rows[2].RefusedCause != nil {
		t.Error("the writer modified the caller's row")
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name string
		row  RequestRow
		want string
	}{
		{"empty rid", RequestRow{Terminal: TerminalCompleted}, "empty rid"},
		{"unknown terminal", RequestRow{RID: "r", Terminal: "done"}, `unknown terminal "done"`},
		{"reason on completed", RequestRow{RID: "r", Terminal: TerminalCompleted, Reason: Ptr("x")}, "must be null"},
		{"failed without reason", RequestRow{RID: "r", Terminal: TerminalFailed}, "needs a reason"},
		{"failed with a refusal cause", RequestRow{RID: "r", Terminal: TerminalFailed, Reason: Ptr(CauseQueue)}, `unknown reason "queue"`},
		{"unclassified row", RequestRow{RID: "r", Terminal: TerminalRejected, Reason: Ptr(string(fault.Unclassified)), Rejected: true}, `unknown reason "unclassified"`},
		{"flag without terminal", RequestRow{RID: "r", Terminal: TerminalCompleted, Expired: true}, "expired is true"},
		{"cause on completed", RequestRow{RID: "r", Terminal: TerminalCompleted, RefusedCause: Ptr(CauseQueue)}, "only refused rows"},
		{"wrong cause", RequestRow{RID: "r", Terminal: TerminalRefused, Refused: true, Reason: Ptr(CauseSlotWait), RefusedCause: Ptr(CauseQueue)}, `needs refused_cause "decode"`},
		{"token accounting", RequestRow{RID: "r", Terminal: TerminalCompleted, TokenAccounting: "words"}, "token_accounting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.row.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestWriterRefusesInvalidRowWithoutWriting(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	n := buf.Len()
	if err := w.Request(&RequestRow{RID: "r", Terminal: TerminalFailed}); err == nil {
		t.Fatal("a failed row without a reason was written")
	}
	if err := w.Request(nil); err == nil {
		t.Fatal("nil row accepted")
	}
	if buf.Len() != n {
		t.Fatalf("refused rows wrote bytes: %q", buf.String()[n:])
	}
}

func TestErrorMessageCutAt240Characters(t *testing.T) {
	row := completed("r")
	row.AttemptFailures = []AttemptFailure{{Phase: fault.Prefill, Reason: fault.EngineError, RetryReason: RetryAllowed,
		ErrorMessage: strings.Repeat("é", 300)}}
	line := writeOne(t, row)
	var got RequestRow
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	msg := got.AttemptFailures[0].ErrorMessage
	if utf8.RuneCountInString(msg) != MaxErrorMessage || !utf8.ValidString(msg) {
		t.Fatalf("message has %d characters (valid UTF-8 %v), want %d", utf8.RuneCountInString(msg), utf8.ValidString(msg), MaxErrorMessage)
	}
	if utf8.RuneCountInString(row.AttemptFailures[0].ErrorMessage) != 300 {
		t.Fatal("the writer modified the caller's failure entry")
	}
}

func TestReasonListsMatchSpec(t *testing.T) {
	// runtime.md §1.17, in table order; a new reason must be added here on
	// purpose. router_lost is narwhal's own (docs/reliability.md), and so
	// are output_cut (a stream the engine cut after output, observability.md)
	// and the deadline queue's deadline and queue_full (docs/router.md).
	want := map[string][]string{
		"failed": {"no_engine", "engine_unreachable", "engine_connection", "engine_timeout", "engine_overloaded",
			"engine_rejected", "engine_error", "local_pool", "invalid_response", "response_limit", "internal", "output_cut",
			"router_lost"},
		"rejected": {"inflight_limit", "saturated", "not_ready"},
		"refused":  {"queue", "prompt", "aggregate_unpriced", "slot_wait", "kv_capacity", "tpot", "deadline", "queue_full"},
		"expired":  {"deadline", "queue_timeout", "handoff"},
		"terminal": {"completed", "failed", "refused", "rejected", "expired", "invalid", "cancelled"},
	}
	got := map[string][]string{"failed": FailedReasons(), "rejected": RejectedReasons(), "refused": RefusedCauses(),
		"expired": ExpiredReasons(), "terminal": TerminalValues()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reason lists (-spec +code):\n%s", diff)
	}
	if slices.Contains(RejectedReasons(), string(fault.Unclassified)) {
		t.Fatal("unclassified must not be pre-created")
	}
}

// What a client sends cannot make its row large: client_rid is cut to
// MaxClientRID bytes (on a character boundary) with its length recorded,
// error to MaxError characters; admission records likewise.
func TestClientSuppliedStringsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		want     int  // bytes kept
		cut      bool // client_rid_bytes set
	}{
		{"short", "abc", 3, false},
		{"at the bound", strings.Repeat("a", MaxClientRID), MaxClientRID, false},
		{"huge", strings.Repeat("a", 900<<10), MaxClientRID, true},
		{"multibyte at the edge", strings.Repeat("a", MaxClientRID-1) + "é", MaxClientRID - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := completed("r")
			row.ClientRID = Ptr(tc.id)
			row.Error = Ptr(strings.Repeat("x", 1<<20))
			line := writeOne(t, row)
			var got RequestRow
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatal(err)
			}
			if len(*got.ClientRID) != tc.want || (got.ClientRIDBytes != nil) != tc.cut ||
				(tc.cut && *got.ClientRIDBytes != len(tc.id)) || !utf8.ValidString(*got.ClientRID) {
				t.Errorf("client_rid %d bytes, client_rid_bytes %v; want %d bytes, cut %v", len(*got.ClientRID), got.ClientRIDBytes, tc.want, tc.cut)
			}
			if len(*got.Error) != MaxError {
				t.Errorf("error kept %d bytes, want %d", len(*got.Error), MaxError)
			}
			if len(line) > 4096 {
				t.Errorf("a row of %d bytes from one request", len(line))
			}
			var buf bytes.Buffer
			w, err := New(&buf, testOpts(1))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Admitted(Admission{RID: "r", ClientRID: Ptr(tc.id), Endpoint: "/v1/completions"}); err != nil {
				t.Fatal(err)
			}
			if rec := strings.Split(buf.String(), "\n")[1]; len(rec) > 1024 {
				t.Errorf("an admission record of %d bytes", len(rec))
			}
		})
	}
}
