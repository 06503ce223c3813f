package report

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ports"
)

// writeJournal writes n completed rows (and a controller flip every
// 10,000 rows) through the journal's own writer, as a router would.
func writeJournal(tb testing.TB, path string, n int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := journal.New(bw, journal.Options{Source: "sha256:" + strings.Repeat("ab", 32),
		Clock: ports.NewFake(time.Unix(1790000000, 0)), Rng: ports.NewSeededRng(1)})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := w.Request(sampleRow(i)); err != nil {
			tb.Fatal(err)
		}
		if i%10_000 == 9_999 {
			to := []string{"prefill", "decode"}[i/10_000%2]
			w.Event(journal.ControllerDecision(float64(i)/100, journal.Decision{Prefill: 2, Decode: 2, By: "reactive",
				Result: "applied", Applied: true, Details: map[string]any{"iid": "p1", "to": to}}))
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
}

func sampleRow(i int) *journal.RequestRow {
	p, d := fmt.Sprintf("p%d", i%2), fmt.Sprintf("d%d", i%2)
	ttft, tpot := 0.05+float64(i%100)/1000, 0.01+float64(i%50)/10000
	return &journal.RequestRow{RID: fmt.Sprintf("r%07d", i), ClientRID: journal.Ptr(fmt.Sprintf("c%07d", i)),
		Arrived: float64(i) / 100, InputLen: 512, InputSized: true, WantedLen: journal.Ptr(128), OutputLen: journal.Ptr(128),
		TTFT: &ttft, TPOT: &tpot, FirstByte: journal.Ptr(ttft + 0.004), DecodeTPOT: &tpot, DurationS: ttft + 127*tpot,
		Attempts: 1, DecodeTries: 1, PrefillIID: &p, DecodeIID: &d, Crossed: journal.Ptr(true),
		CachedTokens: map[string]int{p: 0}, Terminal: journal.TerminalCompleted}
}

// BenchmarkReadJournal1M scores a 1,000,000-row journal (about 1 GB).
// Its reported heap-MB is the live heap after the read: the scorer's
// state does not grow with the rows (docs/bench.md quotes the numbers).
func BenchmarkReadJournal1M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "journal.jsonl")
	writeJournal(b, path, 1_000_000)
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for range b.N {
		r, err := ReadJournal(path, nil, Options{SLO: SLO{TTFT: 0.1, TPOT: 0.012}})
		if err != nil {
			b.Fatal(err)
		}
		if r.Counts.Offered != 1_000_000 {
			b.Fatalf("read %d rows", r.Counts.Offered)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
		runtime.KeepAlive(r)
	}
}
