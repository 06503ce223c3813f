package report

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one figure: its file stem, and the plot.
type Chart struct {
	Name  string
	Title string
	plot  *plot.Plot
}

// Charts builds the report's figures: attainment against offered rate,
// the TTFT and TPOT CDFs against their SLO lines, and for every run with
// role control the prefill pool over time beside the offered load.
func Charts(runs []*Run) ([]Chart, error) {
	var out []Chart
	if c, ok, err := attainmentChart(runs); err != nil {
		return nil, err
	} else if ok {
		out = append(out, c)
	}
	for _, l := range []struct {
		name, title string
		hist        func(*Run) *Hist
		slo         func(*Run) float64
	}{
		{"ttft-cdf", "TTFT distribution against the SLO", func(r *Run) *Hist { return r.TTFT }, func(r *Run) float64 { return r.SLO.TTFT }},
		{"tpot-cdf", "TPOT distribution against the SLO", func(r *Run) *Hist { return r.TPOT }, func(r *Run) float64 { return r.SLO.TPOT }},
	} {
		c, ok, err := cdfChart(l.name, l.title, runs, l.hist, l.slo)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	for i, r := range runs {
		c, ok, err := rolesChart(i, r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// Plot writes every chart as <name>.png and <name>.svg into dir and
// returns the paths written.
func Plot(dir string, runs []*Run) ([]string, error) {
	charts, err := Charts(runs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--plot %s: %w", dir, err)
	}
	var files []string
	for _, c := range charts {
		for _, ext := range []string{".png", ".svg"} {
			p := filepath.Join(dir, c.Name+ext)
			if err := c.plot.Save(8*vg.Inch, 4.5*vg.Inch, p); err != nil {
				return files, fmt.Errorf("--plot: write %s: %w", p, err)
			}
			files = append(files, p)
		}
	}
	return files, nil
}

// label is a run's legend entry: its index and name.
func label(i int, r *Run) string { return "[" + strconv.Itoa(i+1) + "] " + filepath.Base(r.Name) }

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

func addLine(p *plot.Plot, name string, i int, xys plotter.XYs, step bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("chart %q: %w", name, err)
	}
	l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
	l.Dashes = plotutil.Dashes(i / 7) // the palette has seven colours
	if step {
		l.StepStyle = plotter.PostStep
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// attainmentChart plots attainment per offered rate: the sweep steps of
// a run, else its windows (offered per second against attainment).
func attainmentChart(runs []*Run) (Chart, bool, error) {
	p := newPlot("SLO attainment vs offered rate", "offered rate (req/s)", "attainment")
	any := false
	for i, r := range runs {
		var xys plotter.XYs
		for _, s := range r.Steps {
			if s.Offered > 0 {
				xys = append(xys, plotter.XY{X: s.Rate, Y: s.Attainment})
			}
		}
		if len(xys) == 0 {
			for _, w := range r.Windows {
				if w.Offered > 0 {
					xys = append(xys, plotter.XY{X: float64(w.Offered) / r.WindowS, Y: w.Attainment})
				}
			}
			sortXY(xys)
		}
		if len(xys) == 0 {
			continue
		}
		any = true
		if err := addLine(p, label(i, r), i, xys, false); err != nil {
			return Chart{}, false, err
		}
	}
	if !any {
		return Chart{}, false, nil
	}
	if err := targetLine(p, runs[0].Target); err != nil {
		return Chart{}, false, err
	}
	p.Y.Min, p.Y.Max = 0, 1.05
	p.Legend.Top, p.Legend.Left = false, true // curves fall to the right: the lower left stays clear
	return Chart{Name: "attainment", Title: "SLO attainment vs offered rate", plot: p}, true, nil
}

func targetLine(p *plot.Plot, target float64) error {
	l := plotter.NewFunction(func(float64) float64 { return target })
	l.Color, l.Dashes = color.Gray{Y: 110}, []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("target "+pct(target)+"%", l)
	return nil
}

// cdfChart plots each run's distribution with a dashed vertical line at
// each SLO target.
func cdfChart(name, title string, runs []*Run, hist func(*Run) *Hist, slo func(*Run) float64) (Chart, bool, error) {
	p := newPlot(title, "seconds", "share of completed requests ≤ x")
	seen := map[float64]bool{}
	anyData := false
	for i, r := range runs {
		xs, ys := hist(r).CDF()
		if len(xs) == 0 {
			continue
		}
		anyData = true
		xys := make(plotter.XYs, len(xs))
		for k := range xs {
			xys[k] = plotter.XY{X: xs[k], Y: ys[k]}
		}
		if err := addLine(p, label(i, r), i, xys, true); err != nil {
			return Chart{}, false, err
		}
		if t := slo(r); t > 0 && !seen[t] {
			seen[t] = true
			if err := sloLine(p, t, i); err != nil {
				return Chart{}, false, err
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.02
	p.Legend.Top = false // CDFs rise to the upper left: the lower right stays clear
	return Chart{Name: name, Title: title, plot: p}, anyData, nil
}

func sloLine(p *plot.Plot, t float64, i int) error {
	l, err := plotter.NewLine(plotter.XYs{{X: t, Y: 0}, {X: t, Y: 1}})
	if err != nil {
		return err
	}
	l.Color, l.Dashes = plotutil.Color(i), []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("SLO "+num(t)+" s", l)
	return nil
}

// rolesChart plots one run's prefill pool size over time, a step line,
// beside its offered load per window.
func rolesChart(i int, r *Run) (Chart, bool, error) {
	splits := r.Control.Splits
	if len(splits) == 0 {
		return Chart{}, false, nil
	}
	end := r.WallS
	var load plotter.XYs
	for _, w := range r.Windows {
		load = append(load, plotter.XY{X: w.StartS, Y: float64(w.Offered) / r.WindowS})
		end = max(end, w.StartS+r.WindowS)
	}
	var pool plotter.XYs
	for _, s := range splits {
		pool = append(pool, plotter.XY{X: s.At, Y: float64(s.Prefill)})
		end = max(end, s.At)
	}
	pool = append(pool, plotter.XY{X: end, Y: pool[len(pool)-1].Y})
	title := "Roles over the load: " + label(i, r)
	p := newPlot(title, "seconds since start", "engines / req/s")
	if err := addLine(p, "prefill engines", 0, pool, true); err != nil {
		return Chart{}, false, err
	}
	if len(load) > 0 {
		if err := addLine(p, "offered req/s", 1, load, true); err != nil {
			return Chart{}, false, err
		}
	}
	if err := flipMarks(p, r.Control.Flips, pool); err != nil {
		return Chart{}, false, err
	}
	p.Y.Min = 0
	return Chart{Name: "roles-" + strconv.Itoa(i+1), Title: title, plot: p}, true, nil
}

// flipMarks puts a glyph at every flip on the pool line.
func flipMarks(p *plot.Plot, flips []Flip, pool plotter.XYs) error {
	if len(flips) == 0 {
		return nil
	}
	var xys plotter.XYs
	for _, f := range flips {
		y := 0.0
		for _, pt := range pool {
			if pt.X <= f.At {
				y = pt.Y
			}
		}
		xys = append(xys, plotter.XY{X: f.At, Y: y})
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(2), Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
	p.Add(s)
	p.Legend.Add("role flips", s)
	return nil
}

func sortXY(xys plotter.XYs) {
	slices.SortStableFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
}
