package journal

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
)

// ScanBriefs reads what the writer wrote: the meta row's start, request
// fields with their nulls, a controller flip, an admission record.
func TestScanBriefsReadsWhatTheWriterWrote(t *testing.T) {
	w, path := openTemp(t, 1)
	ttft := 0.25
	full := &RequestRow{RID: "a", ClientRID: Ptr("c-1"), Arrived: 1.5, InputLen: 8, InputSized: true, WantedLen: Ptr(4),
		OutputLen: Ptr(4), TTFT: &ttft, FirstByte: Ptr(0.3), DurationS: 2, PrefillIID: Ptr("p0"), DecodeIID: Ptr("d1"),
		Crossed: Ptr(true), Terminal: TerminalCompleted}
	w.Admitted(Admission{RID: "a", Arrived: 1.5, Endpoint: "/v1/completions"})
	w.Request(full)
	w.Request(&RequestRow{RID: "b", InputLen: 1, Terminal: TerminalFailed, Reason: Ptr(string(fault.NoEngine)), Error: Ptr("x"), Status: Ptr(503)})
	w.Event(ControllerDecision(3, Decision{Prefill: 1, Decode: 3, By: "reactive", Result: "applied", Applied: true,
		Details: map[string]any{"iid": "p1", "to": "decode"}}))
	w.Close()
	var got []Brief
	_, err := ScanBriefs(path, func(b *Brief) error {
		c := *b
		for _, f := range []*[]byte{&c.Run, &c.Started, &c.ClientRID, &c.Terminal, &c.Reason, &c.PrefillIID, &c.DecodeIID, &c.EventName, &c.FlipIID, &c.FlipTo} {
			if *f != nil {
				*f = append([]byte(nil), *f...)
			}
		}
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Kind != KindMeta || string(got[0].Started) != "2026-09-21T14:13:20Z" || got[1].Kind != KindAdmission {
		t.Fatalf("kinds/meta: %+v", got)
	}
	a := got[2]
	if a.Kind != KindRequest || string(a.Run) != w.Run() || string(a.ClientRID) != "c-1" || a.Arrived != 1.5 || a.TTFT != 0.25 ||
		!math.IsNaN(a.TPOT) || a.FirstByte != 0.3 || a.OutputLen != 4 || a.WantedLen != 4 || string(a.PrefillIID) != "p0" ||
		string(a.DecodeIID) != "d1" || !a.Crossed || a.HasError || a.Reason != nil || string(a.Terminal) != "completed" {
		t.Fatalf("request brief %+v", a)
	}
	b := got[3]
	if b.ClientRID != nil || b.OutputLen != -1 || !math.IsNaN(b.TTFT) || !b.HasError || b.Status != 503 || string(b.Reason) != string(fault.NoEngine) {
		t.Fatalf("failed brief %+v", b)
	}
	d := got[4]
	if d.Kind != KindEvent || string(d.EventName) != EventControllerDecision || !d.Applied || d.Prefill != 1 || d.Decode != 3 ||
		string(d.FlipIID) != "p1" || string(d.FlipTo) != "decode" || d.At != 3 {
		t.Fatalf("decision brief %+v", d)
	}
}

func TestScanBriefsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"torn", meta1 + "\n" + `{"schema":"narwhal.jou`, "truncated final line"},
		{"other schema", meta1 + "\n" + `{"schema":"x","schema_version":1,"run":"r","rid":"a","terminal":"completed"}` + "\n", `unknown schema "x"`},
		{"newer version", strings.Replace(meta1, `"schema_version":1`, `"schema_version":2`, 1) + "\n", "meta row: unknown schema_version 2"},
		{"whole JSON, not a row", meta1 + "\n[1,2]\n", ":2: "},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
		os.WriteFile(p, []byte(c.body), 0o644)
		_, err := ScanBriefs(p, func(*Brief) error { return nil })
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: err %v; want %q naming the file", c.name, err, c.want)
		}
		if c.name == "torn" && !errors.Is(err, ErrTruncated) {
			t.Fatalf("torn tail must wrap ErrTruncated: %v", err)
		}
	}
}

// The tokenizer walks escapes, nested values with brackets inside
// strings, and every scalar kind; what it cannot walk is an error.
func TestBriefTokenizer(t *testing.T) {
	env := `{"schema":"narwhal.journal","schema_version":1,"run":"r\"1",`
	for _, c := range []struct {
		name, line string
		check      func(b *Brief) bool
		err        string
	}{
		{"escapes", env + `"client_rid":"a\\\"b\u00e9","rid":"x","terminal":"completed","ttft_s":1e-3,"error":null}`,
			func(b *Brief) bool {
				return string(b.Run) == `r"1` && string(b.ClientRID) == `a\"bé` && b.TTFT == 0.001 && !b.HasError
			}, ""},
		{"nested skipped", env + `"attempt_failures":[{"error_message":"}]\"{[","at":1}],"cached_tokens":{"p0":3},"rid":"x","terminal":"failed","reason":"no_engine","error":"e","output_len":null}`,
			func(b *Brief) bool { return b.HasError && b.OutputLen == -1 && string(b.Reason) == "no_engine" }, ""},
		{"empty string and spaces", `{ "schema" : "narwhal.journal" , "schema_version" : 1 , "run" : "" , "event" : "e" , "at" : -2.5 }`,
			func(b *Brief) bool { return b.Kind == KindEvent && b.Run != nil && len(b.Run) == 0 && b.At == -2.5 }, ""},
		{"unterminated", env + `"rid":"x`, nil, "unterminated string"},
		{"no value", env + `"rid":}`, nil, "unexpected"},
		{"bad literal", env + `"crossed":tru}`, nil, "bad literal"},
		{"not an object", `[1,2]`, nil, "expected '{'"},
		{"missing comma", env + `"rid":"x" "terminal":"completed"}`, nil, "expected ',' or '}'"},
	} {
		var b Brief
		err := b.fill([]byte(c.line))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !c.check(&b) {
			t.Errorf("%s: err %v, brief %+v", c.name, err, b)
		}
	}
}
