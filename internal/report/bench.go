package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/narwhal-go/narwhal/internal/loadgen"
)

// benchIndex maps a bench's request ids to their steps, for the join
// with a journal: take marks an id matched.
type benchIndex struct {
	step    map[string]int
	taken   map[string]bool
	notSent int
}

func (b *benchIndex) take(id []byte) (int, bool) {
	st, ok := b.step[string(id)]
	if ok && !b.taken[string(id)] {
		b.taken[string(id)] = true
		return st, true
	}
	return 0, false
}

// unmatched counts sent records without a journal row.
func (b *benchIndex) unmatched() int { return len(b.step) - len(b.taken) }

// IsBench says whether the file at path starts with a bench header.
func IsBench(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("report: %w; check the path", err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadBytes('\n')
	return bytes.Contains(line, []byte(`"schema":"`+loadgen.Schema+`"`)), nil
}

// ReadBench scores a bench results file. Its SLO is the router's (in the
// header) unless o.SLO is set.
func ReadBench(path string, o Options) (*Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w; check the path", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("report %s: empty file; is it narwhal bench --out?", path)
	}
	var h loadgen.Header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Schema != loadgen.Schema {
		return nil, fmt.Errorf("report %s:1: not a %s header; is it narwhal bench --out?", path, loadgen.Schema)
	}
	if h.SchemaVersion != loadgen.SchemaVersion {
		return nil, fmt.Errorf("report %s:1: %s version %d; this build reads %d", path, loadgen.Schema, h.SchemaVersion, loadgen.SchemaVersion)
	}
	r, err := benchRun(path, h, o)
	if err != nil {
		return nil, err
	}
	for line := 2; sc.Scan(); line++ {
		var rec loadgen.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Kind != "request" {
			return nil, fmt.Errorf("report %s:%d: not a request record: %v", path, line, err)
		}
		r.addRecord(&rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	var shifts []float64
	for _, st := range r.Steps[min(1, len(r.Steps)):] {
		shifts = append(shifts, st.StartS)
	}
	r.finish(offerWindow(h.Steps), shifts)
	return r, nil
}

func benchRun(path string, h loadgen.Header, o Options) (*Run, error) {
	o = o.withDefaults()
	slo := o.SLO
	if !(slo.TTFT > 0) && h.SLO != nil {
		slo = *h.SLO
	}
	if !(slo.TTFT > 0 && slo.TPOT > 0) {
		return nil, fmt.Errorf("report %s: the bench did not learn the router's SLO; pass --ttft-slo and --tpot-slo", path)
	}
	r := newRun(path, "bench", slo, o.Target, o.WindowS)
	r.Files, r.Runs, r.Start = []string{path}, []string{h.Run}, h.Started
	for _, st := range h.Steps {
		r.Steps = append(r.Steps, Step{Rate: st.Rate, StartS: st.StartS, DurationS: st.DurationS})
	}
	r.index = &benchIndex{step: map[string]int{}, taken: map[string]bool{}}
	return r, nil
}

func (r *Run) addRecord(rec *loadgen.Record) {
	r.Counts.ByOutcome[rec.Outcome]++
	completed := rec.Outcome == loadgen.OutcomeCompleted
	met := completed && sloMet(r.SLO, rec.TTFT, rec.TPOT, rec.OutputLen, rec.WantedLen)
	refused := rec.Outcome == loadgen.OutcomeHTTPError && rec.Status == 429
	r.count(rec.ScheduledS, rec.Step, met, refused)
	if rec.SentS != nil {
		r.Counts.Sent++
		r.Counts.Attempts += max(1, rec.Attempts) // a record from before attempts were counted was sent once
		r.index.step[rec.ID] = rec.Step
	} else {
		r.index.notSent++
	}
	if completed {
		r.Counts.Completed++
		r.latencies(rec.TTFT, rec.TPOT, rec.E2E)
		return
	}
	r.Refusals[rec.Refusal()]++
}

func offerWindow(steps []loadgen.Step) float64 {
	if len(steps) == 0 {
		return 0
	}
	last := steps[len(steps)-1]
	return last.StartS + last.DurationS
}
