package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMetaRowFirstAndRunID(t *testing.T) {
	w, path := openTemp(t, 1)
	if err := w.Request(completed("r1")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ls := lines(t, path)
	want := `{"meta":{"schema":"narwhal.journal","schema_version":1,"package":"narwhal","version":"v0.0.0-test",` +
		`"git":null,"source":"sha256:` + strings.Repeat("ab", 32) + `","token_accounting":"token_ids",` +
		`"started":"2026-09-21T14:13:20Z","part":1}}`
	if ls[0] != want {
		t.Fatalf("meta row\n got %s\nwant %s", ls[0], want)
	}
	if !regexp.MustCompile(`^1790000000-[0-9a-f]{8}$`).MatchString(w.Run()) {
		t.Fatalf("run id %q is not <unix seconds>-<8 lowercase hex>", w.Run())
	}
	prefix := `{"schema":"narwhal.journal","schema_version":1,"run":"` + w.Run() + `","rid":"r1",`
	if !strings.HasPrefix(ls[1], prefix) {
		t.Fatalf("request row does not start with the envelope:\n%s", ls[1])
	}
}

func TestRunIDDeterministic(t *testing.T) {
	a, _ := openTemp(t, 7)
	b, _ := openTemp(t, 7)
	c, _ := openTemp(t, 8)
	if a.Run() != b.Run() || a.Run() == c.Run() {
		t.Fatalf("same seed must give the same run id, another seed another: %s %s %s", a.Run(), b.Run(), c.Run())
	}
}

func TestMetaGitAndSourceDefaults(t *testing.T) {
	var buf bytes.Buffer
	o := testOpts(1)
	o.Git, o.Source, o.Package = "0123abcd", "", "narwhal-serve"
	if _, err := New(&buf, o); err != nil {
		t.Fatal(err)
	}
	var m struct{ Meta Meta }
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.Meta.Git == nil || *m.Meta.Git != "0123abcd" || m.Meta.Package != "narwhal-serve" {
		t.Fatalf("meta %+v", m.Meta)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(m.Meta.Source) {
		t.Fatalf("source %q is not the executable's sha256", m.Meta.Source)
	}
}

func TestAppendAcrossReopen(t *testing.T) {
	w1, path := openTemp(t, 1)
	if err := w1.Request(completed("a")); err != nil {
		t.Fatal(err)
	}
	w1.Close()
	w2, err := Open(path, testOpts(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Request(completed("b")); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	j, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Metas) != 2 || len(j.Runs) != 2 || j.Runs[0] != w1.Run() || j.Runs[1] != w2.Run() {
		t.Fatalf("want two meta rows and runs [%s %s]; got %d metas, runs %v", w1.Run(), w2.Run(), len(j.Metas), j.Runs)
	}
	if j.Requests[0].Run != w1.Run() || j.Requests[1].Run != w2.Run() {
		t.Fatalf("rows carry the wrong runs: %s %s", j.Requests[0].Run, j.Requests[1].Run)
	}
}

func TestCloseIdempotentAndWritesAfterFail(t *testing.T) {
	w, _ := openTemp(t, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Request(completed("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Request after Close: %v, want ErrClosed", err)
	}
	if err := w.Event(EngineEjected(1, "e1", "breaker")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Event after Close: %v, want ErrClosed", err)
	}
}

// failAfter accepts n writes, then fails.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return len(p) / 2, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriteFailureClosesJournal(t *testing.T) {
	w, err := New(&failAfter{n: 1}, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Request(completed("a")); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("first failing write: %v", err)
	}
	if err := w.Request(completed("b")); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after a short write must be refused, got %v", err)
	}
}

// TestConcurrentWritersWholeLines hammers one writer from many goroutines
// with rows of varied size and checks every line parses, every row is
// there once, and each goroutine's rows keep their call order.
func TestConcurrentWritersWholeLines(t *testing.T) {
	w, path := openTemp(t, 1)
	const workers, perWorker = 16, 150
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range perWorker {
				row := completed(fmt.Sprintf("g%02d-%04d", g, i))
				row.Arrived = float64(i)
				row.Error = Ptr(strings.Repeat("x", (g*131+i*17)%5000))
				if err := w.Request(row); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := w.Event(EngineEjected(float64(i), fmt.Sprintf("g%02d", g), "breaker")); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	w.Close()
	j, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Requests) != workers*perWorker || len(j.Events) != workers*perWorker/10 {
		t.Fatalf("%d request rows, %d events; want %d and %d", len(j.Requests), len(j.Events), workers*perWorker, workers*perWorker/10)
	}
	for rid, n := range Terminals(j.Requests) {
		if n != 1 {
			t.Fatalf("rid %s has %d terminal rows", rid, n)
		}
	}
	last := map[string]float64{}
	for _, r := range j.Requests {
		g := r.Request.RID[:3]
		if prev, ok := last[g]; ok && r.Request.Arrived <= prev {
			t.Fatalf("goroutine %s rows out of call order at line %d", g, r.Line)
		}
		last[g] = r.Request.Arrived
	}
}

func TestEventRowShape(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Unix(1790000123, 250_000_000)
	evs := []struct {
		ev   Event
		want string
	}{
		{EngineEjected(12.5, "e1", "breaker"), `"event":"engine_ejected","at":12.5,"cause":"breaker","iid":"e1"}`},
		{EngineReadmitted(13, "e1", "probe"), `"event":"engine_readmitted","at":13,"evidence":"probe","iid":"e1"}`},
		{EngineLifecycle(wall, "drain_started", map[string]any{"iid": "e2", "wave_id": "w1"}),
			`"event":"engine_lifecycle","at":1790000123.25,"action":"drain_started","iid":"e2","wave_id":"w1"}`},
		{ControllerDecision(14, Decision{Prefill: 2, Decode: 1, By: "reactive", Reason: "ttft pressure", Result: "applied", Applied: true,
			Details: map[string]any{"current_prefill": 1}}),
			`"event":"controller_decision","at":14,"applied":true,"by":"reactive","current_prefill":1,"decode":1,"prefill":2,"reason":"ttft pressure","result":"applied"}`},
		{Event{Name: EventMonitoringRecovered, At: 15}, `"event":"monitoring_recovered","at":15}`},
	}
	for _, e := range evs {
		if err := w.Event(e.ev); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")[1:]
	env := `{"schema":"narwhal.journal","schema_version":1,"run":"` + w.Run() + `",`
	for i, e := range evs {
		if got[i] != env+e.want {
			t.Errorf("event %s\n got %s\nwant %s", e.ev.Name, got[i], env+e.want)
		}
	}
}

func TestEventRejectsEnvelopeKeysAndEmptyName(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(&buf, testOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	before := buf.Len()
	for _, ev := range []Event{
		{Name: "", At: 1},
		{Name: "x", At: 1, Fields: map[string]any{"run": "other"}},
		{Name: "x", At: 1, Fields: map[string]any{"at": 2}},
		{Name: "x", At: 1, Fields: map[string]any{"f": func() {}}},
	} {
		if err := w.Event(ev); err == nil {
			t.Errorf("event %+v was accepted", ev)
		}
	}
	if buf.Len() != before {
		t.Fatalf("a refused event wrote bytes: %q", buf.String()[before:])
	}
}
