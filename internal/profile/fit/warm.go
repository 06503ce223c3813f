package fit

import "fmt"

// WarmCase is one warm-prefill case: Prefix cached tokens, Suffix uncached
// ones, the median time of its repeats.
type WarmCase struct {
	Prefix  int     `json:"prefix_tokens"`
	Suffix  int     `json:"suffix_tokens"`
	Seconds float64 `json:"seconds"`
}

// Warm is a fitted warm prefill surface.
type Warm struct {
	A, B, C, D      float64
	CVMAPE          float64
	MinP, MaxP      int
	MinS, MaxS      int
	Errors          []float64
	FitMAPE         float64
	SplitSubtracted float64
}

// FitWarm fits max(0, a·(2PS+S²) + b·S + d·P + c + split·S_rule(S)) ≥ 0
// over the cases; the split term (from the cold fit) is taken as known.
func FitWarm(cases []WarmCase, block int, split float64) (Warm, error) {
	ps, ss := map[int]bool{}, map[int]bool{}
	for _, c := range cases {
		ps[c.Prefix], ss[c.Suffix] = true, true
	}
	if len(ps) < 2 || len(ss) < 2 || len(cases) < 5 {
		return Warm{}, fmt.Errorf("warm prefill fit needs ≥ 2 prefix lengths, ≥ 2 suffix lengths and ≥ 5 cases, got %d, %d, %d", len(ps), len(ss), len(cases))
	}
	x := make([][]float64, len(cases))
	y := make([]float64, len(cases))
	w := Warm{MinP: cases[0].Prefix, MaxP: cases[0].Prefix, MinS: cases[0].Suffix, MaxS: cases[0].Suffix, SplitSubtracted: split}
	for i, c := range cases {
		P, S := float64(c.Prefix), float64(c.Suffix)
		x[i] = []float64{2*P*S + S*S, S, P, 1}
		y[i] = c.Seconds - split*splitRule(c.Suffix, block)
		w.MinP, w.MaxP = min(w.MinP, c.Prefix), max(w.MaxP, c.Prefix)
		w.MinS, w.MaxS = min(w.MinS, c.Suffix), max(w.MaxS, c.Suffix)
	}
	beta, err := nnls(x, y)
	if err != nil {
		return Warm{}, fmt.Errorf("warm prefill fit: %w", err)
	}
	w.A, w.B, w.D, w.C = beta[0], beta[1], beta[2], beta[3]
	w.Errors = relErrors(x, y, beta)
	w.FitMAPE = mean(w.Errors)
	w.CVMAPE = leaveOneOut(x, y)
	return w, nil
}
