package profile

import (
	"math"
	"testing"
)

// decodeRPSByFormula is runtime.md §2.2's decode_rps written out in one
// piece, the oracle for the prepared form.
func decodeRPSByFormula(r *Row, tpotSLO float64, context, output int, correction float64) float64 {
	if context <= 0 || output <= 0 || correction <= 0 || !r.CoversOutput(output) {
		return 0
	}
	hi := r.DecodeRequestLimit(context)
	if hi <= 0 {
		return 0
	}
	budget := tpotSLO / correction
	inc := floatOr(r.TPOTRequestSlope, 0) + r.TPOTSlope*float64(context)
	b := hi
	if inc > 0 {
		b = min(hi, int(math.Floor((budget-r.TPOTIntercept)/inc)))
	}
	if b < 1 || !r.CoversDecode(b, b*context) {
		return 0
	}
	interval := r.TokenInterval(max(b*context, intOr(r.DecodeMinKVTokens, 0)), max(b, intOr(r.DecodeMinRequests, 1))) * correction
	if interval <= 0 || interval > tpotSLO {
		return 0
	}
	return float64(b) / (float64(output) * interval)
}

// One shape prepared once prices every correction (with or without the
// budget divided out first, one at a time or all at once) bit for bit as
// DecodeRPS's formula does, across rows with and without the optional
// decode fields and at the domain's edges.
func TestDecodeShapeMatchesFormula(t *testing.T) {
	one, eight, ten, thousand, minOut := 1, 8, 10, 1000, 4
	rs := 1e-4
	rows := map[string]Row{
		"bare":       {TPOTSlope: 1e-6, TPOTIntercept: 0.01},
		"bounded":    {TPOTSlope: 1e-6, TPOTIntercept: 0.01, DecodeMinRequests: &one, DecodeMaxRequests: &eight, DecodeMinKVTokens: &ten, DecodeMaxKVTokens: &thousand},
		"per-req":    {TPOTSlope: 6e-7, TPOTIntercept: 0.03, TPOTRequestSlope: &rs, DecodeMaxRequests: &eight, KVCapacityTokens: &thousand},
		"min-output": {TPOTSlope: 1e-6, TPOTIntercept: 0.01, DecodeMaxRequests: &eight, DecodeMinOutputTokens: &minOut},
		"flat":       {TPOTIntercept: 0.01, DecodeMaxRequests: &eight},
	}
	priced := 0
	for name, row := range rows {
		for _, context := range []int{-1, 0, 1, 50, 100, 999, 5000} {
			for _, output := range []int{0, 1, 3, 4, 10, 200} {
				shape := row.DecodeShape(context, output)
				corrs := []float64{-1, 0, 0.5, 1, 1.37, 3}
				budgets, each := make([]float64, len(corrs)), make([]float64, len(corrs))
				for k, corr := range corrs {
					budgets[k], each[k] = 0.05/corr, -7 // RPSEach writes every answer
				}
				shape.RPSEach(0.05, corrs, budgets, each)
				for k, corr := range corrs {
					if want := decodeRPSByFormula(&row, 0.05, context, output, corr); each[k] != want {
						t.Errorf("%s: DecodeShape(%d, %d).RPSEach(0.05, …)[%d] at %g = %v, want %v", name, context, output, k, corr, each[k], want)
					}
				}
				for _, corr := range corrs {
					want := decodeRPSByFormula(&row, 0.05, context, output, corr)
					if got := shape.RPS(0.05, corr); got != want {
						t.Errorf("%s: DecodeShape(%d, %d).RPS(0.05, %g) = %v, want %v", name, context, output, corr, got, want)
					}
					if got := shape.RPSWithin(0.05, corr, 0.05/corr); got != want {
						t.Errorf("%s: DecodeShape(%d, %d).RPSWithin(0.05, %g, budget) = %v, want %v", name, context, output, corr, got, want)
					}
					if got := row.DecodeRPS(0.05, context, output, corr); got != want {
						t.Errorf("%s: DecodeRPS(0.05, %d, %d, %g) = %v, want %v", name, context, output, corr, got, want)
					}
					if want > 0 {
						priced++
					}
				}
			}
		}
	}
	if priced == 0 {
		t.Fatal("no case priced above 0: the table does not exercise the formula")
	}
}

// A row's DecodeFit prices token_interval as the row does, with and
// without the optional request slope, down to the clamp at 0.
func TestDecodeFitIsTheRowsTokenInterval(t *testing.T) {
	rs, neg := 1e-4, -3e-4
	rows := []Row{
		{TPOTSlope: 1e-6, TPOTIntercept: 0.01},
		{TPOTSlope: 6e-7, TPOTIntercept: 0.03, TPOTRequestSlope: &rs},
		{TPOTSlope: 1e-7, TPOTIntercept: 0.001, TPOTRequestSlope: &neg},
	}
	for k, row := range rows {
		fit := row.DecodeFit()
		for _, tokens := range []int{0, 1, 999, 65536} {
			for _, requests := range []int{0, 1, 7, 128} {
				if got, want := fit.TokenInterval(tokens, requests), row.TokenInterval(tokens, requests); got != want {
					t.Fatalf("row %d: DecodeFit().TokenInterval(%d, %d) = %v, the row's %v", k, tokens, requests, got, want)
				}
			}
		}
	}
}
