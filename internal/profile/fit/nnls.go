// Package fit is the profiler's arithmetic (operations.md §6.2): the
// non-negative least-squares solver and the prefill, warm-prefill and
// decode fits built on it, with their error metrics. It has no I/O and
// no clock, so every fit is reproducible from the samples file.
package fit

import (
	"errors"
	"math"
)

// pivotEps is the smallest pivot the normal equations accept (on scaled
// columns); below it the design does not identify the coefficients.
const pivotEps = 1e-12

// ErrDegenerate means no active set gave a solvable, non-negative fit.
var ErrDegenerate = errors.New("degenerate design: the samples do not identify the coefficients")

// nnls minimises ‖Xβ − y‖² subject to β ≥ 0 for a handful of columns by
// solving the normal equations on every non-empty active set and keeping
// the feasible solution with the lowest SSE. Columns are scaled by their
// largest magnitude first so the pivot test means the same on every axis.
func nnls(x [][]float64, y []float64) ([]float64, error) {
	p := len(x[0])
	scale := columnScales(x)
	best, bestSSE := []float64(nil), math.Inf(1)
	for mask := 1; mask < 1<<p; mask++ {
		beta, ok := solveSubset(x, y, scale, mask)
		if !ok {
			continue
		}
		if s := sse(x, y, beta); s < bestSSE {
			best, bestSSE = beta, s
		}
	}
	if best == nil {
		return nil, ErrDegenerate
	}
	return best, nil
}

func columnScales(x [][]float64) []float64 {
	scale := make([]float64, len(x[0]))
	for _, row := range x {
		for j, v := range row {
			scale[j] = math.Max(scale[j], math.Abs(v))
		}
	}
	for j := range scale {
		if scale[j] == 0 {
			scale[j] = 1
		}
	}
	return scale
}

// solveSubset solves the scaled normal equations on the columns in mask;
// ok is false for a tiny pivot or a negative coefficient.
func solveSubset(x [][]float64, y []float64, scale []float64, mask int) ([]float64, bool) {
	var cols []int
	for j := range scale {
		if mask&(1<<j) != 0 {
			cols = append(cols, j)
		}
	}
	k := len(cols)
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for r, row := range x {
		for i, ci := range cols {
			xi := row[ci] / scale[ci]
			for j, cj := range cols {
				a[i][j] += xi * row[cj] / scale[cj]
			}
			a[i][k] += xi * y[r]
		}
	}
	sol, ok := gauss(a)
	if !ok {
		return nil, false
	}
	beta := make([]float64, len(scale))
	for i, c := range cols {
		if sol[i] < 0 {
			return nil, false
		}
		beta[c] = sol[i] / scale[c]
	}
	return beta, true
}

// gauss solves the augmented system a (k × k+1) by elimination with
// partial pivoting.
func gauss(a [][]float64) ([]float64, bool) {
	k := len(a)
	for c := 0; c < k; c++ {
		piv := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		if math.Abs(a[piv][c]) < pivotEps {
			return nil, false
		}
		a[c], a[piv] = a[piv], a[c]
		for r := c + 1; r < k; r++ {
			f := a[r][c] / a[c][c]
			for j := c; j <= k; j++ {
				a[r][j] -= f * a[c][j]
			}
		}
	}
	sol := make([]float64, k)
	for r := k - 1; r >= 0; r-- {
		v := a[r][k]
		for j := r + 1; j < k; j++ {
			v -= a[r][j] * sol[j]
		}
		sol[r] = v / a[r][r]
	}
	return sol, true
}

func predict(row, beta []float64) float64 {
	v := 0.0
	for j, b := range beta {
		v += b * row[j]
	}
	return math.Max(0, v)
}

func sse(x [][]float64, y []float64, beta []float64) float64 {
	s := 0.0
	for i, row := range x {
		d := predict(row, beta) - y[i]
		s += d * d
	}
	return s
}

// relErrors is |pred − obs| / obs per sample (obs ≤ 0 counts as +Inf).
func relErrors(x [][]float64, y []float64, beta []float64) []float64 {
	out := make([]float64, len(y))
	for i, row := range x {
		out[i] = relErr(predict(row, beta), y[i])
	}
	return out
}

func relErr(pred, obs float64) float64 {
	if obs <= 0 {
		return math.Inf(1)
	}
	return math.Abs(pred-obs) / obs
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// leaveOneOut refits without each sample in turn and returns the mean
// relative error of the held-out predictions (+Inf when a refit is
// degenerate: the design depends on that one sample).
func leaveOneOut(x [][]float64, y []float64) float64 {
	errs := make([]float64, len(y))
	for i := range y {
		xs := append(append([][]float64{}, x[:i]...), x[i+1:]...)
		ys := append(append([]float64{}, y[:i]...), y[i+1:]...)
		beta, err := nnls(xs, ys)
		if err != nil {
			return math.Inf(1)
		}
		errs[i] = relErr(predict(x[i], beta), y[i])
	}
	return mean(errs)
}

// Median is the median of v (0 for none); v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sortFloats(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
