package journal

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const meta1 = `{"meta":{"schema":"narwhal.journal","schema_version":1,"package":"narwhal","version":"x","git":null,"source":"sha256:00","token_accounting":"token_ids"}}`

func env(v int, rest string) string {
	return `{"schema":"narwhal.journal","schema_version":` + string(rune('0'+v)) + `,"run":"1-0000000a",` + rest
}

func TestReaderErrorsNameTheLine(t *testing.T) {
	ok := env(1, `"rid":"a","terminal":"completed"}`)
	cases := []struct {
		name, body, want string
	}{
		{"newer row version", meta1 + "\n" + ok + "\n" + env(2, `"rid":"b","terminal":"completed"}`) + "\n",
			"journal.jsonl:3: unknown schema_version 2 (this build reads narwhal.journal 1)"},
		{"newer meta version", strings.Replace(meta1, `"schema_version":1`, `"schema_version":2`, 1) + "\n",
			"journal.jsonl:1: meta row: unknown schema_version 2 (this build reads narwhal.journal 1)"},
		{"other schema", `{"schema":"narwhal.state","schema_version":1,"rid":"a"}` + "\n",
			`journal.jsonl:1: unknown schema "narwhal.state" (this build reads narwhal.journal 1)`},
		{"no envelope", `{"rid":"a","terminal":"completed"}` + "\n", "journal.jsonl:1: row lacks"},
		{"whole JSON, not an object", meta1 + "\n\n" + "[1,2]\n", "journal.jsonl:3: not a JSON object"},
		{"neither", env(1, `"x":1}`) + "\n", `journal.jsonl:1: row has neither "rid"`},
		{"bad terminal", env(1, `"rid":"a","terminal":"done"}`) + "\n", `journal.jsonl:1: journal row a: unknown terminal "done"`},
		{"event without at", env(1, `"event":"x"}`) + "\n", `journal.jsonl:1: event row needs`},
		{"truncated tail", meta1 + "\n" + ok + "\n" + `{"schema":"narwhal.jou`,
			"journal.jsonl:3: truncated final line (22 bytes without a newline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadAll(named{strings.NewReader(c.body), "journal.jsonl"})
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v\nwant prefix %s", err, c.want)
			}
		})
	}
}

func TestTruncatedTailKeepsWholeRows(t *testing.T) {
	body := meta1 + "\n" + env(1, `"rid":"a","terminal":"completed"}`) + "\n" + env(1, `"rid":"b","term`)
	j, err := ReadAll(strings.NewReader(body))
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if len(j.Requests) != 1 || j.Requests[0].Request.RID != "a" {
		t.Fatalf("rows before the tail: %+v", j.Requests)
	}
	if !strings.HasPrefix(err.Error(), "journal:3: ") {
		t.Fatalf("unnamed reader should say journal:3, got %v", err)
	}
}

func TestReaderStopsAtFirstError(t *testing.T) {
	r := NewReader(strings.NewReader("[1]\n" + meta1 + "\n"))
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("Next after an error must repeat it: %v, %v", err1, err2)
	}
}

func TestTerminalsAndDuplicates(t *testing.T) {
	body := meta1 + "\n" +
		env(1, `"rid":"a","terminal":"completed"}`) + "\n" +
		env(1, `"event":"monitoring_recovered","at":3}`) + "\n" +
		env(1, `"rid":"b","terminal":"invalid"}`) + "\n" +
		env(1, `"rid":"a","terminal":"cancelled","cancelled":true}`) + "\n"
	j, err := ReadAll(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	n := Terminals(j.Requests)
	if n["a"] != 2 || n["b"] != 1 || len(n) != 2 {
		t.Fatalf("Terminals = %v", n)
	}
	if d := Duplicates(j.Requests); len(d) != 1 || d[0] != "a" {
		t.Fatalf("Duplicates = %v", d)
	}
	if len(j.Events) != 1 || j.Events[0].Event.Name != EventMonitoringRecovered || j.Events[0].Event.At != 3 || j.Events[0].Line != 3 {
		t.Fatalf("events = %+v", j.Events)
	}
}

func TestEventRoundTrip(t *testing.T) {
	var buf strings.Builder
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		EngineEjected(1.5, "e1", "breaker"),
		ControllerDecision(2, Decision{Prefill: 1, Decode: 3, By: "reactive", Reason: "tpot", Result: "held"}),
		{Name: EventBelowFloor, At: 3, Fields: map[string]any{"live_prefill": 0.0, "min_prefill": 1.0, "ejected": []any{"e1"}}},
	}
	for _, e := range want {
		if err := w.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	j, err := ReadAll(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Events) != len(want) {
		t.Fatalf("read %d events, wrote %d", len(j.Events), len(want))
	}
	for i, e := range want {
		got := j.Events[i].Event
		// JSON numbers read back as float64: compare through JSON.
		wb, _ := json.Marshal(e.Fields)
		gb, _ := json.Marshal(got.Fields)
		if got.Name != e.Name || got.At != e.At || string(wb) != string(gb) || j.Events[i].Run != w.Run() {
			t.Errorf("event %d: got %s@%g %s run %s, want %s@%g %s", i, got.Name, got.At, gb, j.Events[i].Run, e.Name, e.At, wb)
		}
	}
}
