package report

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/devfleet"
	"github.com/narwhal-go/narwhal/internal/loadgen"
)

// A short sweep against make run's fleet, in process: every offered
// request is accounted for on both sides. The report's counts equal the
// journal's rows and the bench's records, every journal row joins a
// bench record by request id, and the charts are valid PNG and SVG with
// the expected series.
func TestSweepAgainstDevFleetAccountsForEveryRequest(t *testing.T) {
	dir := t.TempDir()
	run, err := devfleet.Start(devfleet.Options{Dir: dir}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("dev fleet did not start: %v", err)
	}
	base := run.Base
	benchPath := filepath.Join(dir, "bench.jsonl")
	recs := runSweep(t, base, benchPath)
	// The router drains: every terminal row is written before Run returns.
	if err := run.Stop(); err != nil {
		t.Fatalf("dev fleet did not stop cleanly: %v", err)
	}
	runs, err := Load([]string{benchPath, filepath.Join(dir, "journal.jsonl")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bench, jr := runs[0], runs[1]
	if bench.Counts.Offered != len(recs) || bench.Counts.Sent != len(recs) || len(recs) < 10 {
		t.Fatalf("bench report counts %d offered, %d sent; the bench wrote %d records", bench.Counts.Offered, bench.Counts.Sent, len(recs))
	}
	if jr.Counts.Offered != len(recs) || jr.Join.Matched != len(recs) || jr.Join.BenchOnly != 0 || jr.Join.JournalOnly != 0 {
		t.Fatalf("journal report: %d rows, join %+v; want %d rows, all matched", jr.Counts.Offered, *jr.Join, len(recs))
	}
	for i := range bench.Steps {
		if bench.Steps[i].Offered != jr.Steps[i].Offered || bench.Steps[i].Offered == 0 {
			t.Fatalf("step %d: bench offered %d, journal %d", i, bench.Steps[i].Offered, jr.Steps[i].Offered)
		}
	}
	if bench.Counts.Completed != jr.Counts.Completed {
		t.Fatalf("completed: bench %d, journal %d", bench.Counts.Completed, jr.Counts.Completed)
	}
	checkCharts(t, filepath.Join(dir, "plots"), runs)
}

func runSweep(t *testing.T, base, path string) []loadgen.Record {
	t.Helper()
	sched, err := loadgen.Poisson([]float64{8, 16}, 1, loadgen.Dist{Mean: 32, Max: 32}, loadgen.Dist{Mean: 8, Max: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := loadgen.New(loadgen.Config{Router: base, Schedule: sched, Out: f, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(sched.Offers) {
		t.Fatalf("%d records for %d offers", len(recs), len(sched.Offers))
	}
	return recs
}

// checkCharts plots the runs and checks each file: PNGs decode to a
// picture that is not blank, SVGs are XML naming the expected series.
func checkCharts(t *testing.T, dir string, runs []*Run) {
	t.Helper()
	files, err := Plot(dir, runs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"attainment.svg": {"[1] bench.jsonl", "[2] journal.jsonl", "target 90.0%"},
		"ttft-cdf.svg":   {"[1] bench.jsonl", "[2] journal.jsonl", "SLO 1 s"},
		"tpot-cdf.svg":   {"[1] bench.jsonl", "SLO 0.05 s"},
		"roles-2.svg":    {"prefill engines", "offered req/s"},
	}
	for name, series := range want {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("chart %s missing (wrote %v): %v", name, files, err)
		}
		if err := xml.Unmarshal(svg, new(struct{ XMLName xml.Name })); err != nil {
			t.Fatalf("%s is not XML: %v", name, err)
		}
		for _, s := range series {
			if !strings.Contains(string(svg), s) {
				t.Fatalf("%s lacks series %q", name, s)
			}
		}
		checkPNG(t, filepath.Join(dir, strings.TrimSuffix(name, ".svg")+".png"))
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() < 400 || b.Dy() < 200 {
		t.Fatalf("%s is %dx%d", path, b.Dx(), b.Dy())
	}
	first, differs := img.At(0, 0), false
	for x := 0; x < b.Dx() && !differs; x += 7 {
		for y := 0; y < b.Dy(); y += 7 {
			if img.At(x, y) != first {
				differs = true
				break
			}
		}
	}
	if !differs {
		t.Fatalf("%s is blank", path)
	}
}
