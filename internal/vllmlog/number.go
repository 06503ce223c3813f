package vllmlog

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Exact unit conversion of logged numbers. A logged "14.9888 GiB"
// becomes round(149888 × 2^30 / 10^4) bytes by integer arithmetic, never
// through a float, so the same text always gives the same byte count.

// Unit sizes in bytes.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	MB  int64 = 1_000_000
	GB  int64 = 1_000_000_000
)

// MaxBytes bounds every byte figure and count: the largest integer a
// record carries exactly (2^53 − 1, a JSON number's exact range).
const MaxBytes = 1<<53 - 1

// UnitBytes maps a unit token to bytes. gbIsGiB is set by the patterns whose
// vLLM source prints "GB" for a value divided by 2^30 (for example V0's
// `"Loading model weights took %.4f GB", self.model_memory_usage /
// float(2**30)`); everywhere else GB is the decimal unit.
func UnitBytes(unit string, gbIsGiB bool) (int64, bool) {
	switch unit {
	case "GiB", "Gib": // V0.6.4 prints "memory_usage_post_profile=%.2fGib"
		return GiB, true
	case "MiB":
		return MiB, true
	case "KiB":
		return KiB, true
	case "GB":
		if gbIsGiB {
			return GiB, true
		}
		return GB, true
	case "MB":
		return MB, true
	}
	return 0, false
}

// Decimal is a parsed decimal literal: value = mant / 10^scale.
type Decimal struct {
	mant  *big.Int
	Scale int // digits after the point, as printed
}

// ParseDecimal reads [-]digits[.digits] (thousands separators are handled
// by the callers that expect them). Exponents, signs other than a leading
// minus, and empty parts are refused.
func ParseDecimal(s string) (Decimal, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	intPart, frac, hasPoint := strings.Cut(body, ".")
	if intPart == "" || (hasPoint && frac == "") || !allDigits(intPart) || !allDigits(frac) {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	if len(intPart)+len(frac) > 30 {
		return Decimal{}, fmt.Errorf("%q has too many digits", s)
	}
	m, _ := new(big.Int).SetString(intPart+frac, 10)
	if neg {
		m.Neg(m)
	}
	return Decimal{mant: m, Scale: len(frac)}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var bigTen = big.NewInt(10)

// Bytes converts d × unit to bytes, rounding half away from zero. It
// fails when the result does not fit a record integer (±2^53).
func (d Decimal) Bytes(unit int64) (int64, error) {
	num := new(big.Int).Mul(d.mant, big.NewInt(unit))
	den := new(big.Int).Exp(bigTen, big.NewInt(int64(d.Scale)), nil)
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if twice := new(big.Int).Lsh(new(big.Int).Abs(r), 1); twice.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() || q.Int64() > MaxBytes || q.Int64() < -MaxBytes {
		return 0, fmt.Errorf("value exceeds ±2^53 bytes")
	}
	return q.Int64(), nil
}

// Resolution is the rounding quantum of a value printed with `printed`
// decimals by a format that rounds to at least `declared` decimals (vLLM's
// format_gib rounds to 2 and prints with %s, so "12.0" still means ±0.005).
func Resolution(unit int64, printed, declared int) float64 {
	return float64(unit) / math.Pow10(max(printed, declared))
}

// ParseCount reads a token count, with or without thousands separators
// ("447,088", "2048").
func ParseCount(s string) (int64, error) {
	if strings.Contains(s, ",") {
		groups := strings.Split(s, ",")
		for i, g := range groups {
			if !allDigits(g) || g == "" || (i > 0 && len(g) != 3) || (i == 0 && len(g) > 3) {
				return 0, fmt.Errorf("%q is not a count with thousands separators", s)
			}
		}
		s = strings.ReplaceAll(s, ",", "")
	}
	if !allDigits(s) || s == "" || len(s) > 16 {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > MaxBytes {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// ParseRatio reads a plain decimal ratio ("0.90", "13.64") and its printed
// precision.
func ParseRatio(s string) (float64, int, error) {
	d, err := ParseDecimal(s)
	if err != nil {
		return 0, 0, err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, 0, fmt.Errorf("%q is not a finite number", s)
	}
	return f, d.Scale, nil
}

// DecimalBytes converts a logged decimal ("14.9888", "-0.3") times a unit
// to bytes exactly, by integer arithmetic, rounding half away from zero.
// It fails on anything but [-]digits[.digits] and on results beyond
// ±MaxBytes.
func DecimalBytes(num string, unit int64) (int64, error) {
	d, err := ParseDecimal(num)
	if err != nil {
		return 0, err
	}
	return d.Bytes(unit)
}
