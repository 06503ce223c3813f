package fit

import (
	"fmt"
	"math"
	"sort"
)

// Acceptance limits of the cold prefill fit (operations.md §6.2).
const (
	MaxPrefillMeanError  = 0.20
	MaxPrefillPointError = 0.50
)

// Point is one measured length and the median of its repeats, seconds.
type Point struct {
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"`
}

// Prefill is a fitted cold prefill curve.
type Prefill struct {
	A, B, C     float64
	BlockTokens int     // 0: no split term
	Split       float64 // the partial-block step, with BlockTokens
	MeanError   float64 // mean relative error over the points
	MaxError    float64 // largest relative error
	Errors      []float64
}

func splitRule(n, block int) float64 {
	if block > 0 && n > block && n%block != 0 {
		return 1
	}
	return 0
}

// FitPrefill fits max(0, a·n² + b·n + c [+ split·S(n)]) with every
// coefficient ≥ 0 over per-length medians. block > 0 offers the split
// term, kept only when it halves the plain curve's mean error. The fit is
// returned even when it fails acceptance, with the error saying which
// number failed, so the caller can keep it beside the raw samples.
func FitPrefill(pts []Point, block int) (Prefill, error) {
	if distinctTokens(pts) < 3 {
		return Prefill{}, fmt.Errorf("prefill fit needs ≥ 3 distinct lengths, got %d", distinctTokens(pts))
	}
	plain, err := prefillWith(pts, 0)
	if err != nil {
		return Prefill{}, fmt.Errorf("prefill fit: %w", err)
	}
	best := plain
	if splitEligible(pts, block) {
		if s, err := prefillWith(pts, block); err == nil && s.Split > 0 && s.MeanError < 0.5*plain.MeanError {
			best = s
		}
	}
	return best, best.accept()
}

func (p Prefill) accept() error {
	if p.MeanError > MaxPrefillMeanError {
		return fmt.Errorf("prefill fit mean relative error %.3f exceeds %.2f", p.MeanError, MaxPrefillMeanError)
	}
	if p.MaxError > MaxPrefillPointError {
		return fmt.Errorf("prefill fit error %.3f at one length exceeds %.2f", p.MaxError, MaxPrefillPointError)
	}
	return nil
}

// splitEligible: > 4 lengths and ≥ 2 on each side of the block rule.
func splitEligible(pts []Point, block int) bool {
	if block <= 0 || len(pts) <= 4 {
		return false
	}
	on := 0
	for _, p := range pts {
		on += int(splitRule(p.Tokens, block))
	}
	return on >= 2 && len(pts)-on >= 2
}

func prefillWith(pts []Point, block int) (Prefill, error) {
	x, y := prefillDesign(pts, block)
	beta, err := nnls(x, y)
	if err != nil {
		return Prefill{}, err
	}
	f := Prefill{A: beta[0], B: beta[1], C: beta[2]}
	if block > 0 {
		f.BlockTokens, f.Split = block, beta[3]
	}
	f.Errors = relErrors(x, y, beta)
	f.MeanError = mean(f.Errors)
	for _, e := range f.Errors {
		f.MaxError = math.Max(f.MaxError, e)
	}
	return f, nil
}

func prefillDesign(pts []Point, block int) ([][]float64, []float64) {
	x := make([][]float64, len(pts))
	y := make([]float64, len(pts))
	for i, p := range pts {
		n := float64(p.Tokens)
		x[i] = []float64{n * n, n, 1}
		if block > 0 {
			x[i] = append(x[i], splitRule(p.Tokens, block))
		}
		y[i] = p.Seconds
	}
	return x, y
}

func distinctTokens(pts []Point) int {
	seen := map[int]bool{}
	for _, p := range pts {
		seen[p.Tokens] = true
	}
	return len(seen)
}

func sortFloats(v []float64) { sort.Float64s(v) }
