package fit

import (
	"errors"
	"fmt"
)

// Cell is one decode operating point: the median token interval observed
// with Requests active streams and ResidentKV resident KV tokens.
type Cell struct {
	InputTokens int     `json:"input_tokens"`
	Requests    int     `json:"requests"`
	ResidentKV  int     `json:"resident_kv_tokens"`
	Seconds     float64 `json:"interval_s"`
	Samples     int     `json:"samples"`
}

// Decode is a fitted decode plane.
type Decode struct {
	Slope, RequestSlope, Intercept float64
	FitMAPE, CVMAPE                float64
	Errors                         []float64
}

// Limits are the decode acceptance thresholds (profiles.max_decode_*).
type Limits struct {
	MaxFitMAPE, MaxCVMAPE float64
}

// FitDecode fits max(0, slope·k + request_slope·q + intercept) ≥ 0 over
// the cells, with its fit and leave-one-cell-out errors. Like FitPrefill
// it returns the fit with an acceptance error naming the failing number.
func FitDecode(cells []Cell, lim Limits) (Decode, error) {
	if len(cells) < 3 {
		return Decode{}, fmt.Errorf("decode fit needs ≥ 3 cells, got %d", len(cells))
	}
	if err := identifiable(cells); err != nil {
		return Decode{}, err
	}
	x, y := decodeDesign(cells)
	beta, err := nnls(x, y)
	if err != nil {
		return Decode{}, fmt.Errorf("decode fit: %w", err)
	}
	d := Decode{Slope: beta[0], RequestSlope: beta[1], Intercept: beta[2]}
	d.Errors = relErrors(x, y, beta)
	d.FitMAPE = mean(d.Errors)
	if len(cells) >= 4 {
		d.CVMAPE = leaveOneOut(x, y)
	} else {
		return d, errors.New("decode_cv_mape needs ≥ 4 cells (add decode lengths or concurrency levels)")
	}
	return d, d.accept(lim)
}

func (d Decode) accept(lim Limits) error {
	if d.FitMAPE > lim.MaxFitMAPE {
		return fmt.Errorf("decode_fit_mape %.4f exceeds profiles.max_decode_fit_mape %.4f", d.FitMAPE, lim.MaxFitMAPE)
	}
	if d.CVMAPE > lim.MaxCVMAPE {
		return fmt.Errorf("decode_cv_mape %.4f exceeds profiles.max_decode_cv_mape %.4f", d.CVMAPE, lim.MaxCVMAPE)
	}
	return nil
}

// identifiable rejects designs where one axis never varies or the two
// move together (every cell has the same tokens per request).
func identifiable(cells []Cell) error {
	qs, ks, ratios := map[int]bool{}, map[int]bool{}, map[float64]bool{}
	for _, c := range cells {
		qs[c.Requests] = true
		ks[c.ResidentKV] = true
		ratios[float64(c.ResidentKV)/float64(max(c.Requests, 1))] = true
	}
	switch {
	case len(qs) < 2:
		return errors.New("decode fit: the request axis is not identifiable (need ≥ 2 concurrency levels)")
	case len(ks) < 2 || len(ratios) < 2:
		return errors.New("decode fit: the KV-token axis is not identifiable (need ≥ 2 input lengths)")
	}
	return nil
}

func decodeDesign(cells []Cell) ([][]float64, []float64) {
	x := make([][]float64, len(cells))
	y := make([]float64, len(cells))
	for i, c := range cells {
		x[i] = []float64{float64(c.ResidentKV), float64(c.Requests), 1}
		y[i] = c.Seconds
	}
	return x, y
}
