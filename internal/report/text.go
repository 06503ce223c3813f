package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Document is the JSON report: every run, side by side.
type Document struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	Runs          []*Run `json:"runs"`
}

// JSON is the report document, indented, with a final newline.
func JSON(runs []*Run) ([]byte, error) {
	b, err := json.MarshalIndent(Document{Schema: "narwhal.report", SchemaVersion: 1, Runs: runs}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// Table is a metric-by-run table: one row per metric, one column per run.
type Table struct {
	Title string
	Head  []string
	Rows  [][]string
}

func (t *Table) add(name string, cells ...string) {
	t.Rows = append(t.Rows, append([]string{name}, cells...))
}

func (t *Table) write(w io.Writer) {
	fmt.Fprintf(w, "%s\n", t.Title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t\n", strings.Join(t.Head, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(r, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// WriteText prints the runs side by side: the summary, attainment per
// offered rate, refusals by cause and per-engine load.
func WriteText(w io.Writer, runs []*Run) error {
	var b strings.Builder
	for i, r := range runs {
		fmt.Fprintf(&b, "[%d] %s %s: %s; SLO TTFT %s s, TPOT %s s%s\n", i+1, r.Kind, r.Name,
			strings.Join(r.Runs, ","), num(r.SLO.TTFT), num(r.SLO.TPOT), startedNote(r))
	}
	b.WriteString("\n")
	for _, t := range Tables(runs) {
		t.write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func startedNote(r *Run) string {
	note := ""
	if r.Start != "" {
		note = "; started " + r.Start
	}
	if r.TornRows != nil && r.TornRows.Rows > 0 {
		note += "; " + r.TornRows.String() + ", not scored"
	}
	return note
}

// Tables are the report's tables, shared by the text and HTML forms.
func Tables(runs []*Run) []Table {
	out := []Table{summaryTable(runs)}
	if t, ok := stepsTable(runs); ok {
		out = append(out, t)
	}
	out = append(out, keyedTable("Refusals and errors by cause", runs, func(r *Run) map[string]int { return r.Refusals }))
	if t, ok := enginesTable(runs); ok {
		out = append(out, t)
	}
	return out
}

func heads(first string, runs []*Run) []string {
	h := []string{first}
	for i := range runs {
		h = append(h, "["+strconv.Itoa(i+1)+"]")
	}
	return h
}

func summaryTable(runs []*Run) Table {
	t := Table{Title: "Summary", Head: heads("metric", runs)}
	col := func(f func(*Run) string) []string {
		var c []string
		for _, r := range runs {
			c = append(c, f(r))
		}
		return c
	}
	t.add("offered", col(func(r *Run) string { return strconv.Itoa(r.Counts.Offered) })...)
	t.add("sent", col(func(r *Run) string { return strconv.Itoa(r.Counts.Sent) })...)
	t.add("HTTP attempts per call", col(func(r *Run) string {
		if r.Counts.Attempts == 0 || r.Counts.Sent == 0 {
			return "-"
		}
		return fix(float64(r.Counts.Attempts)/float64(r.Counts.Sent), 2)
	})...)
	t.add("completed", col(func(r *Run) string { return strconv.Itoa(r.Counts.Completed) })...)
	t.add("SLO met", col(func(r *Run) string { return strconv.Itoa(r.Counts.Met) })...)
	t.add("refused (429)", col(func(r *Run) string { return strconv.Itoa(r.Counts.Refused) })...)
	t.add("attainment %", col(func(r *Run) string { return pct(r.Attainment.PerRequest) })...)
	t.add("attainment % ex refused", col(func(r *Run) string { return pct(r.Attainment.ExRefused) })...)
	t.add("windows at target %", col(func(r *Run) string { return pct(r.Attainment.Windows) })...)
	t.add("goodput (sustained req/s)", col(func(r *Run) string { return orDash(r.GoodputRPS) })...)
	t.add("SLO-met req/s", col(func(r *Run) string { return fix(r.MetRPS, 3) })...)
	latencyRows(&t, col)
	controlRows(&t, col)
	return t
}

func latencyRows(t *Table, col func(func(*Run) string) []string) {
	for _, l := range []struct {
		name string
		h    func(*Run) *Hist
		slo  func(*Run) float64
	}{
		{"TTFT", func(r *Run) *Hist { return r.TTFT }, func(r *Run) float64 { return r.SLO.TTFT }},
		{"TPOT", func(r *Run) *Hist { return r.TPOT }, func(r *Run) float64 { return r.SLO.TPOT }},
		{"e2e", func(r *Run) *Hist { return r.E2E }, nil},
	} {
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
			t.add(l.name+" "+q.name+" s", col(func(r *Run) string {
				h := l.h(r)
				if h.N() == 0 {
					return "-"
				}
				v := h.Quantile(q.q)
				if l.slo != nil && v > l.slo(r) {
					return fix(v, 4) + "!"
				}
				return fix(v, 4)
			})...)
		}
	}
	t.add("TTFT over SLO", col(func(r *Run) string { return strconv.Itoa(r.TTFTLate) })...)
	t.add("TPOT over SLO", col(func(r *Run) string { return strconv.Itoa(r.TPOTLate) })...)
}

func controlRows(t *Table, col func(func(*Run) string) []string) {
	t.add("re-roles", col(func(r *Run) string { return strconv.Itoa(len(r.Control.Flips)) })...)
	t.add("re-roles/h", col(func(r *Run) string { return fix(r.Control.ReRolesPerHour, 1) })...)
	t.add("thrash/h", col(func(r *Run) string { return fix(r.Control.ThrashPerHour, 1) })...)
	t.add("time to adapt s", col(func(r *Run) string {
		if r.Control.AdaptS == nil {
			return "-"
		}
		return fix(*r.Control.AdaptS, 1)
	})...)
	t.add("KV crossed share %", col(func(r *Run) string { return pct(r.Handoff.CrossedShare) })...)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		t.add("KV handoff crossed "+q.name+" s", col(func(r *Run) string { return quant(r.Handoff.Crossed, q.q) })...)
	}
	t.add("KV handoff local p50 s", col(func(r *Run) string { return quant(r.Handoff.Local, 0.5) })...)
	t.add("joined to bench (matched/bench-only/journal-only)", col(func(r *Run) string {
		if r.Join == nil {
			return "-"
		}
		return fmt.Sprintf("%d/%d/%d", r.Join.Matched, r.Join.BenchOnly, r.Join.JournalOnly)
	})...)
}

func quant(h *Hist, q float64) string {
	if h.N() == 0 {
		return "-"
	}
	return fix(h.Quantile(q), 4)
}

func stepsTable(runs []*Run) (Table, bool) {
	var rates []float64
	for _, r := range runs {
		for _, s := range r.Steps {
			if !slices.Contains(rates, s.Rate) {
				rates = append(rates, s.Rate)
			}
		}
	}
	if len(rates) == 0 {
		return Table{}, false
	}
	slices.Sort(rates)
	t := Table{Title: "Attainment % by offered rate (met/offered)", Head: heads("req/s", runs)}
	for _, rate := range rates {
		var cells []string
		for _, r := range runs {
			cell := "-"
			for _, s := range r.Steps {
				if s.Rate == rate {
					cell = fmt.Sprintf("%s (%d/%d)", pct(s.Attainment), s.Met, s.Offered)
				}
			}
			cells = append(cells, cell)
		}
		t.add(num(rate), cells...)
	}
	return t, true
}

func keyedTable(title string, runs []*Run, m func(*Run) map[string]int) Table {
	keys := unionKeys(runs, func(r *Run) []string { return slices.Collect(maps.Keys(m(r))) })
	t := Table{Title: title, Head: heads("cause", runs)}
	for _, k := range keys {
		var cells []string
		for _, r := range runs {
			cells = append(cells, strconv.Itoa(m(r)[k]))
		}
		t.add(k, cells...)
	}
	if len(keys) == 0 {
		t.add("(none)", make([]string, len(runs))...)
	}
	return t
}

func enginesTable(runs []*Run) (Table, bool) {
	iids := unionKeys(runs, func(r *Run) []string { return slices.Collect(maps.Keys(r.Engines)) })
	if len(iids) == 0 {
		return Table{}, false
	}
	t := Table{Title: "Per-engine load (prefill legs / decode legs) and roles over time", Head: heads("engine", runs)}
	for _, iid := range iids {
		var cells []string
		for _, r := range runs {
			e, ok := r.Engines[iid]
			if !ok {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, fmt.Sprintf("%d / %d  %s", e.Prefill, e.Decode, roles(e.Roles)))
		}
		t.add(iid, cells...)
	}
	return t, true
}

// unionKeys is every key some run has, sorted.
func unionKeys(runs []*Run, keys func(*Run) []string) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		for _, k := range keys(r) {
			seen[k] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func roles(spans []RoleSpan) string {
	var parts []string
	for _, s := range spans {
		if s.At == 0 {
			parts = append(parts, s.Role)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s@%ss", s.Role, fix(s.At, 0)))
	}
	return strings.Join(parts, "→")
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) }

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func fix(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

func orDash(f float64) string {
	if f <= 0 {
		return "-"
	}
	return num(f)
}
