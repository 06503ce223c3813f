package report

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

func TestHistQuantileWithinATenthOfAPercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 10, 1000, 20000} {
		var h Hist
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = math.Exp(rng.NormFloat64() - 3) // log-normal around 50 ms
			h.Add(xs[i])
		}
		slices.Sort(xs)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			exact := xs[min(n-1, int(q*float64(n)))]
			got := h.Quantile(q)
			if math.Abs(got-exact) > 0.001*exact+1e-6 {
				t.Fatalf("n=%d q=%v: %v, exact nearest rank %v (over 0.1%% + 1 µs)", n, q, got, exact)
			}
		}
		if h.N() != n || h.Below(xs[n-1]) != 1 {
			t.Fatalf("n=%d: N %d, Below(max) %v", n, h.N(), h.Below(xs[n-1]))
		}
	}
	var empty Hist
	if empty.Quantile(0.5) != 0 || empty.Summary() != (Summary{}) {
		t.Fatal("an empty histogram reports zeros")
	}
}

func TestWindowsCoarsenToStayBounded(t *testing.T) {
	r := newRun("x", "journal", SLO{TTFT: 1, TPOT: 1}, 0.9, 1)
	r.count(0.5, -1, true, false)
	r.count(maxWindows+10, -1, false, true) // past the bound: windows merge
	if r.WindowS != 2 || len(r.Windows) > maxWindows {
		t.Fatalf("window %v s, %d windows; want 2 s and at most %d", r.WindowS, len(r.Windows), maxWindows)
	}
	total := 0
	for _, w := range r.Windows {
		total += w.Offered
	}
	if total != 2 || r.Windows[0].Met != 1 {
		t.Fatalf("merging lost counts: %d offered, first window %+v", total, r.Windows[0])
	}
}

// scoreFixture writes a journal of two router runs, rotated, with known
// outcomes, and scores it.
func scoreFixture(t *testing.T) *Run {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	start := time.Unix(1790000000, 0)
	for run, rows := range [][]*journal.RequestRow{
		{row("a", 1, 0.5, 0.01, true), row("b", 2, 1.5, 0.01, false), refused("c", 3)},
		{row("d", 1, 0.2, 0.2, true), failed("e", 2)},
	} {
		clock := ports.NewFake(start.Add(time.Duration(run) * 100 * time.Second))
		w, err := journal.Open(path, journal.Options{Source: "sha256:00", Clock: clock, MaxBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := w.Request(r); err != nil {
				t.Fatal(err)
			}
		}
		for i, to := range []string{"decode", "prefill"} {
			w.Event(journal.ControllerDecision(float64(10+10*i), journal.Decision{Prefill: 1 + i, Decode: 3 - i, By: "reactive",
				Result: "applied", Applied: true, Details: map[string]any{"iid": "p1", "to": to}}))
		}
		w.Close()
	}
	files, _ := journal.SetFiles(path)
	if len(files) < 2 {
		t.Fatalf("fixture did not rotate: %v", files)
	}
	r, err := ReadJournal(path, nil, Options{SLO: SLO{TTFT: 1, TPOT: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func row(rid string, at, ttft, tpot float64, crossed bool) *journal.RequestRow {
	p, d := "p0", "d0"
	return &journal.RequestRow{RID: rid, Arrived: at, InputLen: 8, InputSized: true, WantedLen: journal.Ptr(4),
		OutputLen: journal.Ptr(4), TTFT: &ttft, TPOT: &tpot, FirstByte: journal.Ptr(ttft + 0.25), DurationS: ttft + 1,
		PrefillIID: &p, DecodeIID: &d, Crossed: &crossed, Terminal: journal.TerminalCompleted}
}

func refused(rid string, at float64) *journal.RequestRow {
	return &journal.RequestRow{RID: rid, Arrived: at, InputLen: 8, InputSized: true, Terminal: journal.TerminalRefused,
		Reason: journal.Ptr(journal.CauseQueue), Status: journal.Ptr(429)}
}

func failed(rid string, at float64) *journal.RequestRow {
	return &journal.RequestRow{RID: rid, Arrived: at, InputLen: 8, InputSized: true, Terminal: journal.TerminalFailed,
		Reason: journal.Ptr(string(fault.NoEngine)), Error: journal.Ptr("no engine"), Status: journal.Ptr(503)}
}

func TestJournalScoring(t *testing.T) {
	r := scoreFixture(t)
	c := r.Counts
	// met: a (0.5 s, 10 ms). b is late on TTFT, d on TPOT; c refused, e failed.
	if c.Offered != 5 || c.Completed != 3 || c.Met != 1 || c.Refused != 1 || len(r.Runs) != 2 {
		t.Fatalf("counts %+v, runs %v", c, r.Runs)
	}
	if r.Attainment.PerRequest != 0.2 || r.Attainment.ExRefused != 0.25 {
		t.Fatalf("attainment %+v; want 1/5 per request and 1/4 without the refusal", r.Attainment)
	}
	if r.Refusals["refused:queue"] != 1 || r.Refusals["failed:no_engine"] != 1 || len(r.Refusals) != 2 {
		t.Fatalf("refusals %v", r.Refusals)
	}
	if r.TTFTLate != 1 || r.TPOTLate != 1 {
		t.Fatalf("late: TTFT %d, TPOT %d", r.TTFTLate, r.TPOTLate)
	}
	// The second run started 100 s after the first: its rows and flips
	// sit at 101 s, 110 s, 120 s on the report's clock.
	fl := r.Control.Flips
	if len(fl) != 4 || fl[2].At != 110 || fl[3].At != 120 || r.Control.Reversals != 3 {
		t.Fatalf("flips %+v, reversals %d; want 4 flips, the second run's at 110 and 120 s, 3 reversals", fl, r.Control.Reversals)
	}
	if r.WallS != 101 {
		t.Fatalf("wall %v s; want 101 (arrivals from 1 s to 102 s)", r.WallS)
	}
	h := r.Handoff
	if h.Crossed.N() != 2 || h.Local.N() != 1 || math.Abs(h.Crossed.Quantile(0.5)-0.25) > 0.003 || h.CrossedShare != 0.666667 {
		t.Fatalf("handoff crossed %d (p50 %v), local %d, share %v", h.Crossed.N(), h.Crossed.Quantile(0.5), h.Local.N(), h.CrossedShare)
	}
	// Phases of 101 s / 3 from 1 s: shifts at 34.67 and 68.33 s; the
	// first flip after each is at 110 s: lags 75.33 and 41.67, median
	// sorted[1] = 75.33.
	if r.Control.AdaptS == nil || math.Abs(*r.Control.AdaptS-75.333) > 0.01 {
		t.Fatalf("adapt %v", r.Control.AdaptS)
	}
	if e := r.Engines["p0"]; e.Prefill != 3 || e.Roles[0].Role != "prefill" {
		t.Fatalf("engine p0 %+v", e)
	}
	if e := r.Engines["p1"]; len(e.Roles) != 4 || e.Roles[3].Role != "prefill" {
		t.Fatalf("engine p1 roles %+v", e.Roles)
	}
}

func TestReportTextJSONAndHTML(t *testing.T) {
	r := scoreFixture(t)
	var b strings.Builder
	if err := WriteText(&b, []*Run{r, r}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"attainment %", "20.0", "refused:queue", "thrash/h", "KV handoff crossed p50 s", "decode@10s→prefill@20s→decode@110s"} {
		if !strings.Contains(b.String(), s) {
			t.Fatalf("text report lacks %q:\n%s", s, b.String())
		}
	}
	j, err := JSON([]*Run{r})
	if err != nil || !strings.Contains(string(j), `"per_request": 0.2`) || !strings.Contains(string(j), `"p50_s"`) {
		t.Fatalf("json: %v\n%s", err, j)
	}
	page, err := HTML([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if strings.Count(html, "<svg") < 3 || !strings.Contains(html, "<table>") || strings.Contains(html, "<?xml") {
		t.Fatalf("page lacks inline charts or tables")
	}
	for _, ext := range []string{`src="http`, `href="http`, "<script", "<link"} {
		if strings.Contains(html, ext) {
			t.Fatalf("page is not self-contained: it has %s", ext)
		}
	}
}

func TestReadJournalNeedsAnSLO(t *testing.T) {
	_, err := ReadJournal(filepath.Join(t.TempDir(), "j.jsonl"), nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "--ttft-slo") {
		t.Fatalf("err %v", err)
	}
}

// A torn row (a router killed mid-row, the line ended by the next open)
// is skipped and counted, and the rows around it are scored; before, it
// ended the report with an error.
func TestTornRowIsSkippedAndCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	for i, rows := range [][]*journal.RequestRow{{row("a", 1, 0.5, 0.01, true)}, {row("b", 2, 0.5, 0.01, true)}} {
		w, err := journal.Open(path, journal.Options{Source: "sha256:00"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			w.Request(r)
		}
		w.Close()
		if i == 0 {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(`{"schema":"narwhal.journal","schema_version":1,"rid":"x","ter`)
			f.Close()
		}
	}
	r, err := ReadJournal(path, nil, Options{SLO: SLO{TTFT: 1, TPOT: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts.Offered != 2 || r.TornRows == nil || r.TornRows.Rows != 1 || r.TornRows.First != path+":3" {
		t.Fatalf("offered %d, torn %+v; want 2 scored and 1 torn at %s:3", r.Counts.Offered, r.TornRows, path)
	}
	var b strings.Builder
	if err := WriteText(&b, []*Run{r}); err != nil || !strings.Contains(b.String(), "1 torn row(s) skipped, the first at "+path+":3, not scored") {
		t.Fatalf("the text does not say so (err %v):\n%s", err, b.String())
	}
}
